import { createHmac, timingSafeEqual } from "node:crypto";
import { inArray } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import { tenantSecretKeys } from "../db/schema/secrets.ts";
import type { DataProtection } from "./data-protection.ts";
import type { TenantSecretKey, TenantSecretKeyring } from "./tenant-secrets.ts";

/**
 * Binds each tenant-secret key id to its key. The fingerprint is a keyed check value (HMAC-SHA256
 * of a constant under the key's derived data key): equal keys give equal fingerprints, and it tells
 * nothing about the key. The first process that starts (its start-up gates passed) or rotates with a
 * key id records it; from then on a different key under that id is refused (start-up in Production,
 * `secrets:rotate`), because every secret
 * encrypted under the old key would stop opening while the operator is told all is well.
 */

const CHECK_CONSTANT = "plinth/tenant-secret-key-check/v1";

export function tenantKeyFingerprint(key: TenantSecretKey): string {
  return createHmac("sha256", key.dataKey).update(CHECK_CONSTANT).digest("base64url");
}

/** The configured key ids whose key differs from the one recorded under them, and those not recorded yet. */
export interface TenantKeyFingerprints {
  mismatched: string[];
  unrecorded: string[];
}

/**
 * Compares every configured key id with the fingerprint recorded under it; writes nothing (a start
 * the gates then refuse records no key: src/start-up-gates.ts records them once they pass). Never a
 * key or fingerprint in what it returns.
 */
export async function readTenantKeyFingerprints(
  db: Db,
  keyring: TenantSecretKeyring,
  keyIds: string[] = [...keyring.byId.keys()],
): Promise<TenantKeyFingerprints> {
  if (keyIds.length === 0) return { mismatched: [], unrecorded: [] };
  const recorded = await db
    .select({ keyId: tenantSecretKeys.keyId, fingerprint: tenantSecretKeys.fingerprint })
    .from(tenantSecretKeys)
    .where(inArray(tenantSecretKeys.keyId, keyIds));
  const mismatched: string[] = [];
  const seen = new Set<string>();
  for (const row of recorded) {
    const key = keyring.byId.get(row.keyId);
    if (!key) continue;
    seen.add(row.keyId);
    const expected = Buffer.from(row.fingerprint);
    const actual = Buffer.from(tenantKeyFingerprint(key));
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) mismatched.push(row.keyId);
  }
  const unrecorded = keyIds.filter((keyId) => keyring.byId.has(keyId) && !seen.has(keyId));
  return { mismatched: mismatched.sort(), unrecorded: unrecorded.sort() };
}

/**
 * Records the fingerprint of each of `keyIds` (default: every configured key id) not recorded yet;
 * returns those whose recorded key differs from the configured one (another process recorded its
 * own first, or it was recorded long ago).
 */
export async function recordTenantKeyFingerprints(
  db: Db,
  keyring: TenantSecretKeyring,
  keyIds: string[] = [...keyring.byId.keys()],
): Promise<string[]> {
  const keys = keyIds.flatMap((keyId) => keyring.byId.get(keyId) ?? []);
  if (keys.length === 0) return [];
  await db
    .insert(tenantSecretKeys)
    .values(keys.map((key) => ({ keyId: key.keyId, fingerprint: tenantKeyFingerprint(key) })))
    .onConflictDoNothing();
  return (
    await readTenantKeyFingerprints(
      db,
      keyring,
      keys.map((key) => key.keyId),
    )
  ).mismatched;
}

export const TENANT_KEY_MISMATCH =
  "a different master key is configured under this key id than the one its secrets were encrypted with: restore the original key for this key id (a new key needs a new key id)";

/**
 * Live data-protection ring keys that no configured certificate unwraps: the certificate was
 * replaced without keeping the old one in `PreviousCertificates`, so what those keys protected no
 * longer opens. Returns their ids (a revoked key is no longer listed).
 */
export async function unusableDataProtectionKeys(dataProtection: DataProtection): Promise<string[]> {
  const keys = await dataProtection.listKeys();
  return keys.filter((key) => !key.usable).map((key) => key.id);
}

export const DATA_PROTECTION_MISMATCH =
  "no configured certificate unwraps these ring keys: configure the certificate that wrapped them (Security:DataProtection:CertificatePath, or PreviousCertificates after a change), or revoke them with `bun run secrets:rotate --revoke-data-protection-key <id>` if what they protected may be lost";

/**
 * What `checkKeyBindings` found: the problems and the key ids not recorded yet, or why it could not
 * look (`error`: the database's).
 */
export type KeyBindings =
  | { checked: true; problems: string[]; unrecorded: string[] }
  | { checked: false; error?: unknown };

/**
 * Each tenant-secret key id must still hold the key its secrets were encrypted with, and every live
 * data-protection ring key must unwrap with a configured certificate; problems name key ids, never
 * keys. Writes nothing: the key ids not recorded yet are returned, for `recordKeyBindings` once the
 * start-up gates pass. Not checked: the database did not answer (`error`), or is not migrated yet
 * (no table; the schema checks say so).
 */
export async function checkKeyBindings(
  db: Db,
  keyring: TenantSecretKeyring | null,
  dataProtection: DataProtection,
): Promise<KeyBindings> {
  const problems: string[] = [];
  let unrecorded: string[] = [];
  try {
    if (keyring) {
      const fingerprints = await readTenantKeyFingerprints(db, keyring);
      if (fingerprints.mismatched.length > 0) problems.push(tenantKeyProblem(fingerprints.mismatched));
      unrecorded = fingerprints.unrecorded;
    }
    const unusable = await unusableDataProtectionKeys(dataProtection);
    if (unusable.length > 0 && dataProtection.protectedAtRest)
      problems.push(`data protection ring key(s) ${unusable.join(", ")}: ${DATA_PROTECTION_MISMATCH}`);
  } catch (error) {
    return notChecked(error);
  }
  return { checked: true, problems, unrecorded };
}

/**
 * Records the key ids `checkKeyBindings` found unrecorded, once the start-up gates passed; a problem:
 * another process recorded a different key under one of them meanwhile.
 */
export async function recordKeyBindings(
  db: Db,
  keyring: TenantSecretKeyring | null,
  unrecorded: string[],
): Promise<KeyBindings> {
  if (!keyring || unrecorded.length === 0) return { checked: true, problems: [], unrecorded: [] };
  try {
    const mismatched = await recordTenantKeyFingerprints(db, keyring, unrecorded);
    return {
      checked: true,
      problems: mismatched.length > 0 ? [tenantKeyProblem(mismatched)] : [],
      unrecorded: [],
    };
  } catch (error) {
    return notChecked(error);
  }
}

function tenantKeyProblem(keyIds: string[]): string {
  return `Security:TenantSecrets key id(s) ${keyIds.join(", ")}: ${TENANT_KEY_MISMATCH}`;
}

/** No table yet (not migrated: the schema checks say so), or the database's error. */
function notChecked(error: unknown): KeyBindings {
  const code = (error as { code?: unknown; cause?: { code?: unknown } }).cause?.code;
  if (code === "42P01" || (error as { code?: unknown }).code === "42P01") return { checked: false };
  return { checked: false, error };
}
