import { createHmac, timingSafeEqual } from "node:crypto";
import { inArray } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import { tenantSecretKeys } from "../db/schema/secrets.ts";
import type { DataProtection } from "./data-protection.ts";
import type { TenantSecretKey, TenantSecretKeyring } from "./tenant-secrets.ts";

/**
 * Binds each tenant-secret key id to its key. The fingerprint is a keyed check value (HMAC-SHA256
 * of a constant under the key's derived data key): equal keys give equal fingerprints, and it tells
 * nothing about the key. The first process that sees a key id records it; from then on a different
 * key under that id is refused (start-up in Production, `secrets:rotate`), because every secret
 * encrypted under the old key would stop opening while the operator is told all is well.
 */

const CHECK_CONSTANT = "plinth/tenant-secret-key-check/v1";

export function tenantKeyFingerprint(key: TenantSecretKey): string {
  return createHmac("sha256", key.dataKey).update(CHECK_CONSTANT).digest("base64url");
}

/**
 * Records the fingerprint of every configured key id not seen before; returns the key ids whose
 * configured key differs from the recorded one (never a key or fingerprint).
 */
export async function checkTenantKeyFingerprints(db: Db, keyring: TenantSecretKeyring): Promise<string[]> {
  const keys = [...keyring.byId.values()];
  if (keys.length === 0) return [];
  await db
    .insert(tenantSecretKeys)
    .values(keys.map((key) => ({ keyId: key.keyId, fingerprint: tenantKeyFingerprint(key) })))
    .onConflictDoNothing();
  const recorded = await db
    .select({ keyId: tenantSecretKeys.keyId, fingerprint: tenantSecretKeys.fingerprint })
    .from(tenantSecretKeys)
    .where(
      inArray(
        tenantSecretKeys.keyId,
        keys.map((key) => key.keyId),
      ),
    );
  const mismatched: string[] = [];
  for (const row of recorded) {
    const key = keyring.byId.get(row.keyId);
    if (!key) continue;
    const expected = Buffer.from(row.fingerprint);
    const actual = Buffer.from(tenantKeyFingerprint(key));
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) mismatched.push(row.keyId);
  }
  return mismatched.sort();
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

/** What `checkKeyBindings` found: the problems, or why it could not look (`error`: the database's). */
export type KeyBindings = { checked: true; problems: string[] } | { checked: false; error?: unknown };

/**
 * Each tenant-secret key id must still hold the key its secrets were encrypted with, and every live
 * data-protection ring key must unwrap with a configured certificate; problems name key ids, never
 * keys. Not checked: the database did not answer (`error`), or is not migrated yet (no table; the
 * schema checks say so).
 */
export async function checkKeyBindings(
  db: Db,
  keyring: TenantSecretKeyring | null,
  dataProtection: DataProtection,
): Promise<KeyBindings> {
  const problems: string[] = [];
  try {
    if (keyring) {
      const mismatched = await checkTenantKeyFingerprints(db, keyring);
      if (mismatched.length > 0)
        problems.push(`Security:TenantSecrets key id(s) ${mismatched.join(", ")}: ${TENANT_KEY_MISMATCH}`);
    }
    const unusable = await unusableDataProtectionKeys(dataProtection);
    if (unusable.length > 0 && dataProtection.protectedAtRest)
      problems.push(`data protection ring key(s) ${unusable.join(", ")}: ${DATA_PROTECTION_MISMATCH}`);
  } catch (error) {
    const code = (error as { code?: unknown; cause?: { code?: unknown } }).cause?.code;
    if (code === "42P01" || (error as { code?: unknown }).code === "42P01") return { checked: false };
    return { checked: false, error };
  }
  return { checked: true, problems };
}
