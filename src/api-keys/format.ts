import { createHash, randomInt, timingSafeEqual } from "node:crypto";

/**
 * A tenant API key: `plk_` + a 12-character id part + `_` + a 32-character secret part, both
 * base62 (URL-safe, selected whole by a double click). The secret part carries 32 × log2(62) ≈ 190
 * bits. `plk_` and the id part are the key's `prefix`: not secret, shown in lists and logs.
 */
export const API_KEY_PREFIX = "plk_";
const ID_LENGTH = 12;
const SECRET_LENGTH = 32;
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const KEY = /^(plk_[0-9A-Za-z]{12})_[0-9A-Za-z]{32}$/;

/** Uniform base62 characters from the CSPRNG (randomInt rejects biased draws). */
function base62(length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) out += BASE62[randomInt(62)];
  return out;
}

/** A new id part's prefix (`plk_…`, unique per key). */
export function newPrefix(): string {
  return `${API_KEY_PREFIX}${base62(ID_LENGTH)}`;
}

/** A new key under `prefix` (a new key, or a roll of one: the prefix stays, the secret changes). */
export function newApiKey(prefix: string): string {
  return `${prefix}_${base62(SECRET_LENGTH)}`;
}

/** Whether a bearer token is meant as an API key (rather than an access token). */
export function isApiKeyShaped(token: string): boolean {
  return token.startsWith(API_KEY_PREFIX);
}

/** The prefix of a well-formed key; null for anything else. */
export function prefixOf(key: string): string | null {
  return KEY.exec(key)?.[1] ?? null;
}

/**
 * SHA-256 of the whole key, as stored (hex). A key is random, so a fast hash suffices (no password
 * hash: nothing to stretch, and a check must cost microseconds); see docs/api-keys.md.
 */
export function apiKeyHash(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** Constant-time comparison of a presented key's digest with a stored hex hash. */
export function hashMatches(digest: Buffer, storedHex: string | null): boolean {
  if (storedHex === null || storedHex.length !== digest.length * 2) return false;
  return timingSafeEqual(digest, Buffer.from(storedHex, "hex"));
}

/** The raw digest of a presented key, compared with `hashMatches`. */
export function apiKeyDigest(key: string): Buffer {
  return createHash("sha256").update(key).digest();
}
