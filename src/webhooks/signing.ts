import { createHmac, randomBytes } from "node:crypto";

/** A new signing secret: `whsec_` + Base64 of 24 random bytes (the Standard Webhooks form). */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(24).toString("base64")}`;
}

/**
 * `v1,<Base64 HMAC-SHA256>` of `<id>.<timestamp>.<body>` under the secret's key bytes (the Base64
 * after `whsec_`), as the Standard Webhooks specification signs a message.
 */
export function signatureOf(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
  const mac = createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64");
  return `v1,${mac}`;
}

/** The three Standard Webhooks headers; with several secrets (a rotation) one signature each, space-separated. */
export function signedHeaders(
  secrets: string[],
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": secrets.map((s) => signatureOf(s, id, timestampSeconds, body)).join(" "),
  };
}
