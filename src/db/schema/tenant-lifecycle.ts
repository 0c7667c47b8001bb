import { index, integer, jsonb, pgTable, primaryKey, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

export const tenantExportStatuses = ["pending", "running", "succeeded", "failed"] as const;
export type TenantExportStatus = (typeof tenantExportStatuses)[number];

/**
 * A tenant's export (docs/tenant-lifecycle.md): the job writes every row and object of the tenant
 * into one archive in object storage (`object_key`) with its manifest.
 */
export const tenantExports = pgTable(
  "tenant_exports",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    status: text({ enum: tenantExportStatuses }).notNull().default("pending"),
    /** 0–100: the share of tables and objects written. */
    progress: integer().notNull().default(0),
    /** Who asked: `user:<id>` or `system:<name>`. */
    requestedBy: text().notNull(),
    /**
     * When the platform admin asked for the provider secrets: the archive key derived from the
     * passphrase given at export time, sealed under the installation's tenant-secret keyring, and the
     * salt it was derived with. Cleared when the job ends.
     */
    secretsSealing: jsonb().$type<{
      salt: string;
      keyId: string;
      nonce: string;
      ciphertext: string;
    } | null>(),
    objectKey: text(),
    manifest: jsonb().$type<Record<string, unknown>>(),
    error: text(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp({ withTimezone: true }),
  },
  (t) => [index("tenant_exports_tenant_idx").on(t.tenantId, t.createdAt), tenantIsolation()],
);

/**
 * Codes and custom hostnames of deleted tenants, kept from reuse until `reserved_until`
 * (`Tenancy:ReservedDays`): a new tenant cannot take over a deleted one's links and mail. No
 * `tenant_id`: the row outlives the tenant on purpose.
 */
export const tenantReservations = pgTable(
  "tenant_reservations",
  {
    kind: text({ enum: ["code", "host"] }).notNull(),
    value: text().notNull(),
    deletedTenantId: uuid().notNull(),
    reservedUntil: timestamp({ withTimezone: true }).notNull(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.value] })],
);
