import { createHmac, timingSafeEqual } from "node:crypto";

/** The header a payment provider signs its webhooks with: `t=<unix seconds>,v1=<hex HMAC-SHA256>`. */
export const SIGNATURE_HEADER = "plinth-signature";

/** HMAC-SHA256 over `<t>.<raw body>` with the tenant's webhook secret, hex. */
export function signPayload(secret: string, timestamp: number, rawBody: string): string {
  return createHmac("sha256", secret).update(`${timestamp}.${rawBody}`).digest("hex");
}

/** A complete header value, as a provider (or a test) sends it. */
export function signatureHeader(secret: string, timestamp: number, rawBody: string): string {
  return `t=${timestamp},v1=${signPayload(secret, timestamp, rawBody)}`;
}

export type SignatureCheck =
  | { ok: true; timestamp: number }
  | { ok: false; reason: "malformed" | "stale" | "mismatch" };

/**
 * Checks a signature header: well-formed, its timestamp within `toleranceSeconds` of `now` (older or
 * newer deliveries are refused as replays), and one of its `v1` values equal, in constant time, to
 * the HMAC of `<t>.<raw body>`. Several `v1` values are accepted so a provider can roll its secret.
 */
export function verifySignature(
  header: string | undefined,
  rawBody: string,
  secret: string,
  now: Date,
  toleranceSeconds: number,
): SignatureCheck {
  if (!header) return { ok: false, reason: "malformed" };
  let timestamp: number | null = null;
  const candidates: string[] = [];
  for (const part of header.split(",")) {
    const [name, value] = part.trim().split("=", 2);
    if (!value) continue;
    if (name === "t" && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (name === "v1" && /^[0-9a-f]{64}$/i.test(value)) candidates.push(value.toLowerCase());
  }
  if (timestamp === null || candidates.length === 0) return { ok: false, reason: "malformed" };
  if (Math.abs(now.getTime() / 1000 - timestamp) > toleranceSeconds) return { ok: false, reason: "stale" };
  const expected = Buffer.from(signPayload(secret, timestamp, rawBody), "hex");
  let match = false;
  for (const candidate of candidates) {
    // every candidate is compared, so the time taken does not say which one matched
    if (timingSafeEqual(expected, Buffer.from(candidate, "hex"))) match = true;
  }
  return match ? { ok: true, timestamp } : { ok: false, reason: "mismatch" };
}
