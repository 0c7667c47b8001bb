import { pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/**
 * A self-serve sign-up waiting for its address to be verified (`Tenancy:SignUp:Enabled`): nothing
 * else exists until the link mailed to it is followed — no tenant, no user. The password is kept
 * only as its argon2id hash; the link is a single-use token (purpose `sign_up`, subject: this row).
 * A platform table: no tenant exists yet.
 */
export const signUpRequests = pgTable("sign_up_requests", {
  id: uuid().primaryKey().defaultRandom(),
  /** Stored lower-cased. */
  email: text().notNull(),
  name: text().notNull(),
  passwordHash: text().notNull(),
  tenantCode: text().notNull(),
  tenantName: text().notNull(),
  createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  expiresAt: timestamp({ withTimezone: true }).notNull(),
  /** When the link was followed and the tenant made (its id). */
  completedAt: timestamp({ withTimezone: true }),
  createdTenantId: uuid(),
});
