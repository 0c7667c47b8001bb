import { pgTable, text, timestamp, unique, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/** A tenant's sensitive provider value, encrypted (AES-256-GCM, see src/security/tenant-secrets.ts). */
export const tenantSecrets = pgTable(
  "tenant_secrets",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    name: text().notNull(),
    /** Id of the master key the value is encrypted under; rotation moves every row to the current one. */
    keyId: text().notNull(),
    /** Base64 GCM nonce. */
    nonce: text().notNull(),
    /** Base64 ciphertext with the GCM tag appended. */
    ciphertext: text().notNull(),
    ...timestamps,
  },
  (t) => [unique("tenant_secrets_tenant_name_unique").on(t.tenantId, t.name), tenantIsolation()],
);

/**
 * The fingerprint of each tenant-secret master key, by key id, stored the first time a process sees
 * the key id (src/security/key-fingerprints.ts). A different key under a known key id is refused:
 * the data encrypted under the old key would otherwise stop opening, silently.
 */
export const tenantSecretKeys = pgTable("tenant_secret_keys", {
  keyId: text().primaryKey(),
  /** Base64url HMAC-SHA256 of a constant under the key's derived data key: identifies, reveals nothing. */
  fingerprint: text().notNull(),
  createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
});

/**
 * Each tenant's data key (src/security/tenant-data-keys.ts): 32 random bytes that seal the tenant's
 * secrets, stored only wrapped (AES-256-GCM) under the master key `wrappingKeyId` names. Deleting the
 * tenant deletes this row first: every value sealed under it, in the database or any backup of it,
 * no longer opens (crypto-shredding). Master-key rotation re-wraps this row only.
 */
export const tenantDataKeys = pgTable(
  "tenant_data_keys",
  {
    tenantId: tenantIdColumn().primaryKey(),
    /** The data key's own id (`tdk_…`): what a value sealed under it names as its key id. */
    keyId: text().notNull().unique("tenant_data_keys_key_id_unique"),
    /** Id of the master key that wraps it. */
    wrappingKeyId: text().notNull(),
    /** Base64 GCM nonce of the wrapping. */
    nonce: text().notNull(),
    /** Base64 wrapped key with the GCM tag appended. */
    wrapped: text().notNull(),
    ...timestamps,
  },
  () => [tenantIsolation()],
);
