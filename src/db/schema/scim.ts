import { sql } from "drizzle-orm";
import { index, integer, jsonb, pgTable, primaryKey, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { users } from "./identity.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/**
 * A tenant's SCIM bearer token (docs/scim.md): the directory (Okta, Entra ID…) provisions the tenant's
 * members with it. Only the SHA-256 of the token is stored; `prefix` finds the row.
 */
export const scimTokens = pgTable(
  "scim_tokens",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    name: text().notNull(),
    /** `plscim_` and the id part: how a presented token finds its row, and what lists show. */
    prefix: text().notNull().unique(),
    /** SHA-256 (hex) of the whole token. */
    secretHash: text().notNull(),
    createdBy: uuid().references(() => users.id, { onDelete: "set null" }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    lastUsedAt: timestamp({ withTimezone: true }),
    revokedAt: timestamp({ withTimezone: true }),
  },
  (t) => [index("scim_tokens_tenant_idx").on(t.tenantId, t.createdAt, t.id), tenantIsolation()],
);

/**
 * What the directory said of a member it provisions: the SCIM attributes Plinth keeps beside the
 * identity (`users`: the address and the name) and the membership (the status).
 */
export const scimUsers = pgTable(
  "scim_users",
  {
    tenantId: tenantIdColumn(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    externalId: text(),
    /** The `userName` as the directory sent it (the identity's address is its lower-cased form). */
    userName: text().notNull(),
    /** The other attributes of the resource (name, emails, enterprise extension…), as sent. */
    attributes: jsonb().$type<Record<string, unknown>>().notNull().default({}),
    version: integer().notNull().default(1),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.userId] }),
    index("scim_users_external_idx").on(t.tenantId, t.externalId),
    tenantIsolation(),
  ],
);

/** A tenant's group as the directory provisions it; a group may stand for a tenant role (docs/scim.md). */
export const scimGroups = pgTable(
  "scim_groups",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    displayName: text().notNull(),
    externalId: text(),
    version: integer().notNull().default(1),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index("scim_groups_tenant_idx").on(t.tenantId, t.createdAt, t.id),
    index("scim_groups_name_idx").on(t.tenantId, sql`lower(${t.displayName})`),
    tenantIsolation(),
  ],
);

/** The members of a SCIM group (users of the group's tenant). */
export const scimGroupMembers = pgTable(
  "scim_group_members",
  {
    tenantId: tenantIdColumn(),
    groupId: uuid()
      .notNull()
      .references(() => scimGroups.id, { onDelete: "cascade" }),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
  },
  (t) => [
    primaryKey({ columns: [t.groupId, t.userId] }),
    index("scim_group_members_user_idx").on(t.tenantId, t.userId),
    tenantIsolation(),
  ],
);
