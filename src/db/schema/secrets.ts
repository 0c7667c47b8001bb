import { pgTable, text, unique, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenantIdColumn } from "./tenants.ts";

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
  (t) => [unique("tenant_secrets_tenant_name_unique").on(t.tenantId, t.name)],
);
