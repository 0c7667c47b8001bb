import { sql } from "drizzle-orm";
import { boolean, integer, jsonb, pgPolicy, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";

export const tenants = pgTable("tenants", {
  id: uuid().primaryKey().defaultRandom(),
  /** Short unique code: used on the platform host's tenant-code paths and at login. */
  code: text().notNull().unique(),
  name: text().notNull(),
  status: text({ enum: ["Active", "Suspended"] })
    .notNull()
    .default("Active"),
  /**
   * The tenant keeps its users' identities to itself: people it invites get an identity of its own
   * pool, never the shared identity they may have elsewhere (docs/decisions.md).
   */
  privateIdentities: boolean().notNull().default(false),
  /**
   * The tenant's second-factor policy (docs/auth.md "Policies"): who must have one (`off`, `admins`:
   * owners and admins, `everyone`), the days a member without one may still sign in without it after
   * the policy began to hold them (`mfaRequiredSince`), then the sign-in sends them to enrol.
   */
  requireMfa: text({ enum: ["off", "admins", "everyone"] })
    .notNull()
    .default("off"),
  mfaGraceDays: integer().notNull().default(7),
  mfaRequiredSince: timestamp({ withTimezone: true }),
  /** Browsers its users trust skip the second-factor step (src/auth/trusted-devices.ts); off by default. */
  allowTrustedDevices: boolean().notNull().default(false),
  /** Its users may sign in with a code or link mailed to their address (src/auth/email-sign-in.ts). */
  emailSignIn: boolean().notNull().default(false),
  /** When the tenant is to be deleted (docs/tenant-lifecycle.md); null: not scheduled. */
  deletionScheduledFor: timestamp({ withTimezone: true }),
  /** Who scheduled the deletion (`user:<id>`), for its certificate. */
  deletionRequestedBy: text(),
  /** Rows and objects deleted so far, by table and prefix: the certificate's counts, kept across a crash. */
  deletionCounts: jsonb().$type<Record<string, number>>(),
  ...timestamps,
});

/** `tenant_id`: required, and the row goes with its tenant. */
export const tenantIdColumn = () =>
  uuid()
    .notNull()
    .references(() => tenants.id, { onDelete: "cascade" });

/**
 * A row of the transaction's tenant (`plinth.tenant_id`, set per transaction by src/db/operation.ts),
 * or any row on the named platform path (`plinth.platform` = `on`). Without either, no row: a
 * missing context reads nothing and writes nothing.
 */
const tenantRow = sql`tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on'`;

/**
 * The row-level-security policy every table with `tenant_id` is born with: put it in the table's
 * extra config (`(t) => [..., tenantIsolation()]`) and add `ALTER TABLE … FORCE ROW LEVEL SECURITY`
 * to the generated migration (docs/architecture.md, "Every tenant table is born with its policy";
 * `bun run db:isolation` fails without either).
 */
/**
 * The policy of a table that belongs to a tenant only through its parent (`refresh_tokens` through
 * `sessions`, …): a row is admitted when its parent row is, the parent's own policy deciding (a
 * policy's subquery is held by the parent's row-level security like any other query). Same name as
 * tenantIsolation's; `bun run db:isolation` checks every child of a tenant table has it.
 */
export const parentIsolation = (table: string, key: string, parent: string) => {
  const parentRow = sql.raw(`exists (select 1 from "${parent}" p where p.id = "${table}"."${key}")`);
  return pgPolicy("tenant_isolation", {
    as: "permissive",
    for: "all",
    to: "public",
    using: parentRow,
    withCheck: parentRow,
  });
};

export const tenantIsolation = () =>
  pgPolicy("tenant_isolation", {
    as: "permissive",
    for: "all",
    to: "public",
    using: tenantRow,
    withCheck: tenantRow,
  });

/**
 * The users table's policy: a tenant's own users (pool `tenant`) and the users who are its members (a
 * shared identity has no tenant_id; its membership row, itself held to the tenant, admits it), or
 * every user on the platform path. Platform staff (no membership) are seen on the platform path only.
 */
export const userIsolation = () => {
  const userRow = sql`${tenantRow} or exists (select 1 from "tenant_memberships" m where m.user_id = "users"."id")`;
  return pgPolicy("tenant_isolation", {
    as: "permissive",
    for: "all",
    to: "public",
    using: userRow,
    withCheck: userRow,
  });
};
