import { sql } from "drizzle-orm";
import { index, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { users } from "./identity.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/**
 * A tenant's API key (docs/api-keys.md): owned by the tenant, not by the user who made it. The key
 * itself (`plk_<id part>_<secret part>`) is never stored: only its SHA-256, and while a roll's grace
 * period runs, the SHA-256 of the key it replaced.
 */
export const apiKeys = pgTable(
  "api_keys",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    name: text().notNull(),
    scopes: text().array().notNull().default(sql`'{}'::text[]`),
    /** `plk_` and the id part: how a presented key finds its row, and what lists show. */
    prefix: text().notNull().unique(),
    /** SHA-256 (hex) of the whole key. */
    secretHash: text().notNull(),
    /** SHA-256 of the key a roll replaced, accepted until `previousExpiresAt`. */
    previousSecretHash: text(),
    previousExpiresAt: timestamp({ withTimezone: true }),
    /** Who made it; the key outlives them (null once they are removed). */
    createdBy: uuid().references(() => users.id, { onDelete: "set null" }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    /** Written at most once a minute per key. */
    lastUsedAt: timestamp({ withTimezone: true }),
    lastUsedIp: text(),
    rolledAt: timestamp({ withTimezone: true }),
    expiresAt: timestamp({ withTimezone: true }),
    revokedAt: timestamp({ withTimezone: true }),
  },
  (t) => [index("api_keys_tenant_idx").on(t.tenantId, t.createdAt, t.id), tenantIsolation()],
);
