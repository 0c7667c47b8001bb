import { sql } from "drizzle-orm";
import {
  boolean,
  check,
  index,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { users } from "./identity.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

export const emailDomainStatuses = ["pending", "failed", "verified"] as const;
export type EmailDomainStatus = (typeof emailDomainStatuses)[number];

/**
 * An e-mail domain a tenant claims (`example.com`), proved by a TXT record as custom domains are
 * (src/sso/email-domains/). At most one verified claim per domain across the platform: only
 * addresses of a verified domain are routed to a tenant's SSO connection or held by its enforcement.
 */
export const tenantEmailDomains = pgTable(
  "tenant_email_domains",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    /** Canonical: lower case, no trailing dot. */
    domain: text().notNull(),
    status: text({ enum: emailDomainStatuses }).notNull().default("pending"),
    verificationToken: text().notNull(),
    lastCheckedAt: timestamp({ withTimezone: true }),
    lastFailureCode: text(),
    lastFailureReason: text(),
    verifiedAt: timestamp({ withTimezone: true }),
    /**
     * A verified domain whose TXT record a re-check found gone (NXDOMAIN, missing, another value):
     * since when; it turns `failed` `Sso:EmailDomainGraceDays` later. Null while the record holds.
     */
    recordMissingSince: timestamp({ withTimezone: true }),
    /** A pending or failed claim is deleted at this time (`TenantDomains:ClaimExpiryDays`); null while verified. */
    expiresAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    index("tenant_email_domains_tenant_idx").on(t.tenantId),
    uniqueIndex("tenant_email_domains_tenant_domain_idx").on(t.tenantId, t.domain),
    uniqueIndex("tenant_email_domains_verified_idx").on(t.domain).where(sql`${t.status} = 'verified'`),
    check("tenant_email_domains_status_check", sql`${t.status} in ('pending', 'failed', 'verified')`),
    tenantIsolation(),
  ],
);

export const ssoConnectionTypes = ["oidc", "saml"] as const;
export type SsoConnectionType = (typeof ssoConnectionTypes)[number];
export const ssoConnectionStatuses = ["active", "inactive"] as const;
export type SsoConnectionStatus = (typeof ssoConnectionStatuses)[number];

/**
 * A tenant's identity provider (docs/sso.md). At most one `active` connection per tenant: the one
 * discovery routes its verified domains to; an inactive one can still run a test sign-in.
 */
export const ssoConnections = pgTable(
  "sso_connections",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    type: text({ enum: ssoConnectionTypes }).notNull(),
    name: text().notNull().default(""),
    status: text({ enum: ssoConnectionStatuses }).notNull().default("active"),
    /** OIDC: the issuer discovery starts from (`<issuer>/.well-known/openid-configuration`). */
    issuer: text(),
    /** OIDC: the client id registered at the provider. */
    clientId: text(),
    /** OIDC: the tenant secret (src/providers/tenant-secret-store.ts) holding the client secret, sealed. */
    clientSecretName: text(),
    /** Type-specific settings that are not secret (SAML: the IdP metadata, entity ids...). */
    settings: jsonb().$type<Record<string, unknown>>().notNull().default({}),
    /** Claim (OIDC) or attribute (SAML) names for `email`, `name` and `groups`. */
    claimMapping: jsonb().$type<{ email?: string; name?: string; groups?: string }>().notNull().default({}),
    /** The role a provisioned member gets when no group below matches. */
    defaultRole: text({ enum: ["owner", "admin", "member"] })
      .notNull()
      .default("member"),
    /** Group name → tenant role, for members provisioned just in time (highest role wins). */
    groupRoles: jsonb().$type<Record<string, "owner" | "admin" | "member">>().notNull().default({}),
    ...timestamps,
  },
  (t) => [
    index("sso_connections_tenant_idx").on(t.tenantId),
    uniqueIndex("sso_connections_active_idx").on(t.tenantId).where(sql`${t.status} = 'active'`),
    check("sso_connections_type_check", sql`${t.type} in ('oidc', 'saml')`),
    check("sso_connections_status_check", sql`${t.status} in ('active', 'inactive')`),
    tenantIsolation(),
  ],
);

/**
 * One sign-in under way at a provider: created by `startSsoSignIn`, spent by the callback (deleted
 * as it is read, so a callback is accepted once). Stored by the SHA-256 of its `state`.
 */
export const ssoSignInAttempts = pgTable(
  "sso_sign_in_attempts",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    connectionId: uuid()
      .notNull()
      .references(() => ssoConnections.id, { onDelete: "cascade" }),
    stateHash: text().notNull().unique(),
    /** Where the single-use code goes (an allowed origin's URL, or the console); null: the console. */
    returnTo: text(),
    /** A test sign-in (docs/sso.md): reports its checks, signs no one in. */
    test: boolean().notNull().default(false),
    /** Type-specific values the callback needs, sealed with data protection where secret (OIDC: nonce, PKCE verifier). */
    data: jsonb().$type<Record<string, string>>().notNull().default({}),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
  },
  (t) => [index("sso_sign_in_attempts_expiry_idx").on(t.expiresAt), tenantIsolation()],
);

/** A tenant's SSO enforcement (`PUT /api/tenant/sso/enforcement`). */
export const tenantSsoSettings = pgTable(
  "tenant_sso_settings",
  {
    tenantId: tenantIdColumn(),
    /** Password and e-mail-code sign-in refused for addresses of the tenant's verified domains. */
    enforced: boolean().notNull().default(false),
    /** The owner who may still sign in with a password while SSO is enforced (break glass). */
    breakGlassUserId: uuid().references(() => users.id, { onDelete: "set null" }),
    ...timestamps,
  },
  (t) => [primaryKey({ columns: [t.tenantId] }), tenantIsolation()],
);

/**
 * The single-use, 60-second code a finished SSO sign-in redirects to `returnTo` with
 * (`POST /api/auth/sso/exchange` turns it into a session). Stored only as its SHA-256.
 */
export const ssoSignInCodes = pgTable(
  "sso_sign_in_codes",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    userId: uuid()
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    connectionId: uuid()
      .notNull()
      .references(() => ssoConnections.id, { onDelete: "cascade" }),
    codeHash: text().notNull().unique(),
    /** How the provider authenticated the user (RFC 8176 `amr` values it reported, if any). */
    amr: jsonb().$type<string[]>().notNull().default([]),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
    usedAt: timestamp({ withTimezone: true }),
  },
  (t) => [index("sso_sign_in_codes_expiry_idx").on(t.expiresAt), tenantIsolation()],
);

/**
 * A time-limited set-up link a platform admin hands a tenant's owner
 * (`POST /api/admin/tenants/{tenantId}/sso/setup-links`, docs/sso.md "Hand an owner a set-up link"):
 * it grants nothing by itself; opened by an owner of the tenant signed in to the console, it leads to
 * the tenant's SSO page. Only the SHA-256 of its 256-bit token is stored.
 */
export const ssoSetupLinks = pgTable(
  "sso_setup_links",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    /** SHA-256 (base64url) of the token the link carries (src/auth/opaque-tokens.ts `tokenHash`). */
    tokenHash: text().notNull().unique(),
    /** The platform admin who made it (null once that user is deleted, or for Plinth itself). */
    createdBy: uuid().references(() => users.id, { onDelete: "set null" }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp({ withTimezone: true }).notNull().default(sql`now() + interval '72 hours'`),
    /** The first time an owner of the tenant opened it, and who. */
    openedAt: timestamp({ withTimezone: true }),
    openedBy: uuid().references(() => users.id, { onDelete: "set null" }),
    revokedAt: timestamp({ withTimezone: true }),
  },
  (t) => [index("sso_setup_links_tenant_idx").on(t.tenantId, t.createdAt, t.id), tenantIsolation()],
);
