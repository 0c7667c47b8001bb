/**
 * Object keys: every key a tenant names is relative to `tenants/<tenantId>/` and may never leave
 * it. Refused: absolute keys, `.`/`..` or empty segments (also after percent-decoding and Unicode
 * normalisation, so `%2e%2e/` and full-width dots do not pass), backslashes, control characters.
 */

import { isLowerCaseUuid } from "../uuid.ts";

/** S3 allows 1024 bytes per key; the tenant prefix takes 45 of them, an upload's grant mark 39. */
const MAX_KEY_BYTES = 1024 - 39;

export class InvalidObjectKeyError extends Error {
  override name = "InvalidObjectKeyError";
}

export function tenantPrefix(tenantId: string): string {
  if (!isLowerCaseUuid(tenantId)) throw new InvalidObjectKeyError("the tenant id is not a lower-case UUID");
  return `tenants/${tenantId}/`;
}

/**
 * Marks the object version one presigned upload writes: `<key>~g~<grant id>`. Reserved: a
 * tenant's key may not contain it.
 */
export const GRANT_MARK = "~g~";
const GRANT_SUFFIX = /~g~([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The S3 key one upload grant writes: the tenant's full key plus the grant's mark. */
export function grantObjectKey(fullKey: string, grantId: string): string {
  if (!isLowerCaseUuid(grantId)) throw new InvalidObjectKeyError("the grant id is not a lower-case UUID");
  return `${fullKey}${GRANT_MARK}${grantId}`;
}

/** A stored key as the tenant's key and, for a presigned upload's object, its grant id. */
export function splitGrantKey(stored: string): { key: string; grantId: string | null } {
  const match = GRANT_SUFFIX.exec(stored);
  return match
    ? { key: stored.slice(0, match.index), grantId: match[1] ?? null }
    : { key: stored, grantId: null };
}

function checkForm(key: string): string | null {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f-\u009f]/.test(key)) return "contains a control character";
  if (key.includes("\\")) return "contains a backslash";
  if (key.startsWith("/")) return "is absolute";
  if (/^[a-z][a-z0-9+.-]*:/i.test(key)) return "is a URL";
  if (key.includes(GRANT_MARK)) return `contains "${GRANT_MARK}" (reserved)`;
  const segments = key.split("/");
  if (segments.some((s) => s === "")) return "has an empty segment";
  if (segments.some((s) => s === "." || s === "..")) return "has a . or .. segment";
  return null;
}

/** Why the relative key is refused, or null when it is acceptable. */
export function objectKeyProblem(key: string): string | null {
  if (typeof key !== "string" || key.length === 0) return "is empty";
  const forms = new Set<string>([key, key.normalize("NFKC")]);
  // decode repeatedly: a key that means traversal after one or two decodings is refused too
  let decoded = key;
  for (let i = 0; i < 3 && decoded.includes("%"); i++) {
    try {
      decoded = decodeURIComponent(decoded);
    } catch {
      return "has a malformed percent-encoding";
    }
    forms.add(decoded);
    forms.add(decoded.normalize("NFKC"));
  }
  for (const form of forms) {
    const problem = checkForm(form);
    if (problem) return problem;
  }
  return null;
}

/** The full object key for a tenant's relative key; throws InvalidObjectKeyError when the key is refused. */
export function tenantObjectKey(tenantId: string, key: string): string {
  const prefix = tenantPrefix(tenantId);
  const problem = objectKeyProblem(key);
  if (problem) throw new InvalidObjectKeyError(`the object key ${problem}`);
  const full = `${prefix}${key}`;
  if (Buffer.byteLength(full, "utf8") > MAX_KEY_BYTES)
    throw new InvalidObjectKeyError("the object key is too long");
  return full;
}

/** The tenant-relative key of a full key, or null when the full key is not under the tenant's prefix. */
export function relativeObjectKey(tenantId: string, fullKey: string): string | null {
  const prefix = tenantPrefix(tenantId);
  return fullKey.startsWith(prefix) ? fullKey.slice(prefix.length) : null;
}
