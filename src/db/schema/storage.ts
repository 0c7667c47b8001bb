import { sql } from "drizzle-orm";
import { bigint, index, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/**
 * One presigned upload: the object version it may write (`object_key`, unique to the grant), the
 * exact size signed into the URL and charged to `storage_bytes` when granted, and who asked for it.
 * A delete refunds `size` once (`refunded_at`), and not before the URL has expired
 * (`expires_at`): a URL reused after a delete writes bytes that are still charged.
 */
export const storageGrants = pgTable(
  "storage_grants",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    /** The key the tenant named (relative to its prefix). */
    key: text().notNull(),
    /** The full S3 key the URL writes: `tenants/<tenantId>/<key>~g~<id>`. */
    objectKey: text().notNull().unique(),
    size: bigint({ mode: "number" }).notNull(),
    /** The tenant user who asked for the upload (null: an operator or a server-side caller). */
    uploadedBy: uuid(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    /** When the tenant deleted the object; the refund follows once the URL has expired. */
    deletedAt: timestamp({ withTimezone: true }),
    refundedAt: timestamp({ withTimezone: true }),
    /** The object was seen stored after the URL expired: the charge stands until a delete. */
    confirmedAt: timestamp({ withTimezone: true }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index("storage_grants_tenant_key_idx").on(t.tenantId, t.key),
    // grants to settle once their URL expired: deleted ones to refund, never-seen ones to look at
    index("storage_grants_unsettled_idx")
      .on(t.tenantId, t.expiresAt)
      .where(sql`${t.refundedAt} is null and (${t.deletedAt} is not null or ${t.confirmedAt} is null)`),
    tenantIsolation(),
  ],
);
