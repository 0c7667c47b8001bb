import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** A high-entropy opaque token (refresh tokens, cookie values, CSRF tokens). */
export function opaqueToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** SHA-256 is enough for high-entropy tokens: they cannot be guessed, only stolen. */
export function tokenHash(token: string): string {
  return createHash("sha256").update(token).digest("base64url");
}

export function hmac(key: string, value: string): string {
  return createHmac("sha256", key).update(value).digest("base64url");
}

/** Constant-time equality of two strings (of any length). */
export function safeEqual(a: string, b: string): boolean {
  const left = createHash("sha256").update(a).digest();
  const right = createHash("sha256").update(b).digest();
  return timingSafeEqual(left, right) && a.length === b.length;
}
