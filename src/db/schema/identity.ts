import { sql } from "drizzle-orm";
import {
  type AnyPgColumn,
  boolean,
  check,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { parentIsolation, tenantIdColumn, tenantIsolation, tenants, userIsolation } from "./tenants.ts";

/**
 * Where an identity (one sign-in) lives, docs/decisions.md "One identity, several tenants":
 * `platform` — platform staff, apart from every tenant; `tenant` — a tenant's own user (`tenant_id`),
 * known to that tenant only (every user from before memberships, and every user an owner creates
 * with a password); `shared` — a person who may be a member of several tenants (invitations into a
 * tenant that does not keep its identities private, self-serve sign-up).
 */
export const identityPools = ["platform", "tenant", "shared"] as const;
export type IdentityPool = (typeof identityPools)[number];

export const users = pgTable(
  "users",
  {
    id: uuid().primaryKey().defaultRandom(),
    /** The tenant whose own user this is (pool `tenant`); null for platform staff and shared identities. */
    tenantId: uuid().references(() => tenants.id, { onDelete: "cascade" }),
    pool: text({ enum: identityPools }).notNull().default("platform"),
    /** Stored lower-cased; unique per pool (each tenant's own pool, the shared one, platform staff). */
    email: text().notNull(),
    name: text().notNull().default(""),
    /** E.164 phone number for SMS sign-in; unique per pool. */
    phone: text(),
    /** argon2id in PHC form; null for users who sign in only by SMS. */
    passwordHash: text(),
    status: text({ enum: ["Active", "Disabled"] })
      .notNull()
      .default("Active"),
    mustChangePassword: boolean().notNull().default(false),
    passwordChangedAt: timestamp({ withTimezone: true }),
    /** When the current address was proved (a verification or reset link); null: not verified. */
    emailVerifiedAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    unique("users_pool_email_unique").on(t.pool, t.tenantId, t.email).nullsNotDistinct(),
    uniqueIndex("users_pool_phone_idx")
      .on(t.pool, sql`coalesce(${t.tenantId}, '00000000-0000-0000-0000-000000000000'::uuid)`, t.phone)
      .where(sql`${t.phone} is not null`),
    check(
      "users_pool_check",
      sql`${t.pool} in ('platform', 'tenant', 'shared') and (${t.pool} = 'tenant') = (${t.tenantId} is not null)`,
    ),
    userIsolation(),
  ],
);

export const tenantRoles = ["owner", "admin", "member"] as const;
export type TenantRole = (typeof tenantRoles)[number];

/** A person's place in a tenant: their role there, and whether the tenant has disabled them. */
export const tenantMemberships = pgTable(
  "tenant_memberships",
  {
    tenantId: tenantIdColumn(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text({ enum: tenantRoles }).notNull().default("member"),
    status: text({ enum: ["Active", "Disabled"] })
      .notNull()
      .default("Active"),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.userId] }),
    index("tenant_memberships_user_idx").on(t.userId),
    tenantIsolation(),
  ],
);

/** A sign-in: carries refresh tokens (API clients) or a browser cookie. Revoking it ends both. */
export const sessions = pgTable(
  "sessions",
  {
    id: uuid().primaryKey().defaultRandom(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    tenantId: uuid().references(() => tenants.id, { onDelete: "cascade" }),
    kind: text({ enum: ["token", "browser"] })
      .notNull()
      .default("token"),
    /** Browser sessions: SHA-256 of the cookie value, and of the CSRF token. */
    cookieHash: text().unique(),
    csrfHash: text(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    lastUsedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    revokedAt: timestamp({ withTimezone: true }),
    revokedReason: text(),
    /** The client that signed in: its `User-Agent` (at most 512 characters) and address. */
    userAgent: text(),
    clientIp: text(),
    /** An impersonation: the platform admin acting as the user, and why (docs/auth.md). */
    impersonatorId: uuid().references((): AnyPgColumn => users.id, { onDelete: "cascade" }),
    impersonationReason: text(),
    /**
     * How the session's user last authenticated (RFC 8176 values: `pwd`, `sms`, `otp`, `mfa`…) and
     * when: the sign-in, or a later step-up with a second factor. Access tokens carry both (`amr`,
     * `auth_time`); null `authTime` (sessions from before) reads as `createdAt`.
     */
    amr: text().array().notNull().default(sql`'{}'::text[]`),
    authTime: timestamp({ withTimezone: true }),
  },
  (t) => [
    index("sessions_impersonator_idx").on(t.impersonatorId).where(sql`${t.impersonatorId} is not null`),
    index("sessions_user_idx").on(t.userId),
    tenantIsolation(),
  ],
);

/** Refresh tokens, stored only as SHA-256. Each is used once; reusing a rotated one revokes the session. */
export const refreshTokens = pgTable(
  "refresh_tokens",
  {
    id: uuid().primaryKey().defaultRandom(),
    sessionId: uuid()
      .notNull()
      .references(() => sessions.id, { onDelete: "cascade" }),
    tokenHash: text().notNull().unique(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    rotatedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    index("refresh_tokens_session_idx").on(t.sessionId),
    parentIsolation("refresh_tokens", "session_id", "sessions"),
  ],
);

/** SMS sign-in codes, stored only as an HMAC under the pepper; single use, short-lived. */
export const smsCodes = pgTable(
  "sms_codes",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: uuid().references(() => tenants.id, { onDelete: "cascade" }),
    phone: text().notNull(),
    codeHash: text().notNull(),
    attempts: integer().notNull().default(0),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    consumedAt: timestamp({ withTimezone: true }),
  },
  (t) => [index("sms_codes_lookup_idx").on(t.tenantId, t.phone, t.createdAt), tenantIsolation()],
);

/**
 * E-mail sign-in codes (src/auth/email-sign-in.ts): one message carries a six-digit code and a link;
 * either signs in once and spends both. The code is kept as an HMAC bound to tenant and address, the
 * link's token as its SHA-256.
 */
export const emailSignInCodes = pgTable(
  "email_sign_in_codes",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    email: text().notNull(),
    codeHash: text().notNull(),
    linkHash: text().notNull().unique(),
    attempts: integer().notNull().default(0),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    consumedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    index("email_sign_in_codes_lookup_idx").on(t.tenantId, t.email, t.createdAt),
    index("email_sign_in_codes_user_idx").on(t.userId),
    tenantIsolation(),
  ],
);

/** Built-in catalog of platform roles (seeded by the migrator). */
export const platformRoles = pgTable("platform_roles", {
  code: text().primaryKey(),
  name: text().notNull(),
  description: text().notNull().default(""),
});

export const platformRoleBindings = pgTable(
  "platform_role_bindings",
  {
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text()
      .notNull()
      .references(() => platformRoles.code),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.userId, t.role] }),
    parentIsolation("platform_role_bindings", "user_id", "users"),
  ],
);
