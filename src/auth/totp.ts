import { randomBytes } from "node:crypto";
import { Secret, TOTP } from "otpauth";
import QRCode from "qrcode";

/**
 * TOTP as authenticator apps expect it (RFC 6238): HMAC-SHA-1, 30-second steps, 6 digits, through
 * the `otpauth` library (its comparison is constant-time). A code is accepted one step either side of
 * the current one (±30 s of drift between the phone and the server).
 */
export const TOTP_PERIOD_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** Steps accepted either side of the current one. */
export const TOTP_DRIFT_STEPS = 1;

export type TotpAlgorithm = "SHA1" | "SHA256" | "SHA512";

/** A fresh shared secret: 160 random bits (RFC 4226 §4's recommendation), Base32 as apps read it. */
export function newTotpSecret(): string {
  return new Secret({ buffer: randomBytes(20).buffer }).base32;
}

/** The `otpauth://totp/…` URI an authenticator app scans: issuer, account label and the secret. */
export function totpUri(input: { secret: string; issuer: string; account: string }): string {
  return new TOTP({
    issuer: input.issuer,
    label: input.account,
    secret: Secret.fromBase32(input.secret),
    algorithm: "SHA1",
    digits: TOTP_DIGITS,
    period: TOTP_PERIOD_SECONDS,
  }).toString();
}

/** The URI as a QR code, an SVG document (no script, no external reference) to show inline. */
export function totpQrSvg(uri: string): Promise<string> {
  return QRCode.toString(uri, { type: "svg", errorCorrectionLevel: "M", margin: 2 });
}

/**
 * The time step a code is valid for at `atMs` (within the drift window), or null. Callers refuse a
 * step at or before the last one used (replay). `digits`/`algorithm` only vary for the RFC's vectors.
 */
export function totpStepOf(
  secretBase32: string,
  code: string,
  atMs: number,
  options: { digits?: number; algorithm?: TotpAlgorithm; secret?: Secret } = {},
): number | null {
  const digits = options.digits ?? TOTP_DIGITS;
  if (!new RegExp(`^\\d{${digits}}$`).test(code)) return null;
  const totp = new TOTP({
    secret: options.secret ?? Secret.fromBase32(secretBase32),
    algorithm: options.algorithm ?? "SHA1",
    digits,
    period: TOTP_PERIOD_SECONDS,
  });
  const delta = totp.validate({ token: code, timestamp: atMs, window: TOTP_DRIFT_STEPS });
  if (delta === null) return null;
  return Math.floor(atMs / 1000 / TOTP_PERIOD_SECONDS) + delta;
}
