import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { type Clock, systemClock } from "../clock.ts";
import type { ConfigProblem } from "../config/config-error.ts";
import { DataKeyCache } from "./data-key-cache.ts";

/**
 * Tenant-secret encryption: AES-256-GCM under a key, with associated data binding each ciphertext to
 * its tenant (or user), secret name and key id, so a value copied to another tenant, another name or
 * relabelled with another key id does not decrypt. The keys: each tenant's own data key
 * (src/security/tenant-data-keys.ts), itself wrapped under a master key; values written before
 * data keys existed are sealed directly under a key derived (HKDF-SHA256) from a master key.
 */

const ALGORITHM = "aes-256-gcm";
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HKDF_SALT = Buffer.from("plinth/tenant-secrets/v1", "utf8");
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A master key is Base64 of exactly 32 bytes. */
export function isMasterKey(value: string | undefined): boolean {
  return value !== undefined && BASE64.test(value) && Buffer.from(value, "base64").length === 32;
}

export interface TenantSecretKey {
  keyId: string;
  /** The derived data key (never the master key itself). */
  dataKey: Buffer;
}

export interface TenantSecretKeyring {
  current: TenantSecretKey;
  /** Every key that decrypts, by key id: the current one and the previous ones. */
  byId: Map<string, TenantSecretKey>;
  /** Tenant data keys this process has unwrapped with these master keys. */
  dataKeys: DataKeyCache;
}

/** Ids of tenant data keys begin so; a master key id may not. */
export const DATA_KEY_PREFIX = "tdk_";

export interface TenantSecretKeySettings {
  KeyId?: string | undefined;
  MasterKey?: string | undefined;
  PreviousKeys: { KeyId: string; MasterKey: string }[];
}

/** The encrypted form stored in `tenant_secrets`. */
export interface SealedSecret {
  keyId: string;
  /** Base64 of the 12-byte GCM nonce. */
  nonce: string;
  /** Base64 of ciphertext followed by the 16-byte GCM tag. */
  ciphertext: string;
}

export type TenantSecretFailure = "unknown_key" | "undecryptable";

/** A secret cannot be opened; the message names the key id at most, never a value. */
export class TenantSecretError extends Error {
  override name = "TenantSecretError";
  constructor(
    readonly reason: TenantSecretFailure,
    message: string,
  ) {
    super(message);
  }
}

export function deriveDataKey(masterKeyBase64: string, keyId: string): Buffer {
  const master = Buffer.from(masterKeyBase64, "base64");
  return Buffer.from(hkdfSync("sha256", master, HKDF_SALT, Buffer.from(`plinth:tenant-secret:${keyId}`), 32));
}

function associatedData(tenantId: string, name: string, keyId: string): Buffer {
  // length-prefixed fields: no choice of values can make two different triples collide
  const parts = ["plinth/tenant-secret/v1", tenantId, name, keyId].map((part) => Buffer.from(part, "utf8"));
  return Buffer.concat(
    parts.flatMap((part) => {
      const length = Buffer.alloc(4);
      length.writeUInt32BE(part.length);
      return [length, part];
    }),
  );
}

const SECTION = "Security:TenantSecrets";
const MASTER_KEY_PROBLEM =
  "must be Base64 of exactly 32 bytes (make one with `openssl rand -base64 32` or `bun run keys:generate`)";

/**
 * Reads `Security:TenantSecrets` into a keyring, or lists every problem by key (never a value).
 * `clock` times the keyring's data-key cache.
 */
export function parseTenantSecretKeys(
  settings: TenantSecretKeySettings,
  clock: Clock = systemClock,
): {
  keyring?: TenantSecretKeyring;
  problems: ConfigProblem[];
} {
  const problems: ConfigProblem[] = [];
  if (!settings.KeyId) problems.push({ key: `${SECTION}:KeyId`, problem: "is required" });
  if (!isMasterKey(settings.MasterKey))
    problems.push({ key: `${SECTION}:MasterKey`, problem: MASTER_KEY_PROBLEM });
  for (const [key, id] of [
    [`${SECTION}:KeyId`, settings.KeyId],
    ...settings.PreviousKeys.map((p, i) => [`${SECTION}:PreviousKeys:${i}:KeyId`, p.KeyId]),
  ] as const)
    if (id?.startsWith(DATA_KEY_PREFIX))
      problems.push({
        key,
        problem: `must not begin with ${DATA_KEY_PREFIX} (the prefix of tenant data keys)`,
      });
  const seen = new Set<string>(settings.KeyId ? [settings.KeyId] : []);
  settings.PreviousKeys.forEach((previous, i) => {
    if (seen.has(previous.KeyId))
      problems.push({
        key: `${SECTION}:PreviousKeys:${i}:KeyId`,
        problem: "must differ from every other key id",
      });
    seen.add(previous.KeyId);
    if (!isMasterKey(previous.MasterKey))
      problems.push({
        key: `${SECTION}:PreviousKeys:${i}:MasterKey`,
        problem: MASTER_KEY_PROBLEM,
      });
  });
  if (problems.length > 0 || !settings.KeyId || !settings.MasterKey) return { problems };
  const current = { keyId: settings.KeyId, dataKey: deriveDataKey(settings.MasterKey, settings.KeyId) };
  const byId = new Map<string, TenantSecretKey>([[current.keyId, current]]);
  for (const previous of settings.PreviousKeys)
    byId.set(previous.KeyId, {
      keyId: previous.KeyId,
      dataKey: deriveDataKey(previous.MasterKey, previous.KeyId),
    });
  return { keyring: { current, byId, dataKeys: new DataKeyCache({ clock }) }, problems };
}

/** Encrypts under the keyring's current master key, bound to tenant (or user) and name. */
export function sealSecret(
  keyring: TenantSecretKeyring,
  tenantId: string,
  name: string,
  value: string,
): SealedSecret {
  return sealWith(keyring.current, tenantId, name, value);
}

/** Encrypts under `key`, bound to `binding` (a tenant id, or `user:<id>`), the name and the key id. */
export function sealWith(key: TenantSecretKey, tenantId: string, name: string, value: string): SealedSecret {
  const { keyId, dataKey } = key;
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv(ALGORITHM, dataKey, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(associatedData(tenantId, name, keyId));
  const body = Buffer.concat([cipher.update(value, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { keyId, nonce: nonce.toString("base64"), ciphertext: body.toString("base64") };
}

/** Decrypts with the key the row names; throws TenantSecretError when the key is unknown or anything was altered. */
export function openSecret(
  keyring: TenantSecretKeyring,
  tenantId: string,
  name: string,
  sealed: SealedSecret,
): string {
  const key = keyring.byId.get(sealed.keyId);
  if (!key)
    throw new TenantSecretError("unknown_key", `tenant secret key id "${sealed.keyId}" is not configured`);
  return openWith(key, tenantId, name, sealed);
}

/** Decrypts with `key` (the one `sealed.keyId` names); throws TenantSecretError when anything was altered. */
export function openWith(key: TenantSecretKey, tenantId: string, name: string, sealed: SealedSecret): string {
  const nonce = Buffer.from(sealed.nonce, "base64");
  const body = Buffer.from(sealed.ciphertext, "base64");
  if (nonce.length !== NONCE_BYTES || body.length < TAG_BYTES)
    throw new TenantSecretError("undecryptable", "tenant secret is malformed");
  try {
    const decipher = createDecipheriv(ALGORITHM, key.dataKey, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(associatedData(tenantId, name, sealed.keyId));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(body.subarray(0, body.length - TAG_BYTES)),
      decipher.final(),
    ]).toString("utf8");
  } catch {
    throw new TenantSecretError(
      "undecryptable",
      "tenant secret does not decrypt (altered, moved, or a different master key under this key id)",
    );
  }
}
