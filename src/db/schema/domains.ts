import { sql } from "drizzle-orm";
import { index, integer, pgTable, text, timestamp, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

export const domainStatuses = ["Pending", "Failed", "Active"] as const;
export type DomainStatus = (typeof domainStatuses)[number];

/** A tenant's custom domain: verified by a TXT record and a CNAME, then served by the TLS gateway. */
export const tenantDomains = pgTable(
  "tenant_domains",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    /**
     * Canonical (src/custom-domains/hostname-policy.ts). Each tenant may claim a name once; several
     * tenants may claim the same name, and at most one claim per name is Active (verified).
     */
    hostname: text().notNull(),
    status: text({ enum: domainStatuses }).notNull().default("Pending"),
    verificationToken: text().notNull(),
    /** The CNAME target last seen in DNS. */
    cnameTarget: text(),
    gatewayHostnameId: text(),
    /** The gateway's hostname status (`result.status`, e.g. pending, active). */
    gatewayStatus: text(),
    /** The gateway's certificate status (`result.ssl.status`, e.g. pending_validation, active): DNS success is not TLS. */
    tlsStatus: text(),
    lastCheckedAt: timestamp({ withTimezone: true }),
    /** Stable code of the last failure (see src/custom-domains/verify-records.ts `failureCodes`). */
    lastFailureCode: text(),
    lastFailureReason: text(),
    nextCheckAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    checkAttempts: integer().notNull().default(0),
    lockedBy: text(),
    lockedUntil: timestamp({ withTimezone: true }),
    activatedAt: timestamp({ withTimezone: true }),
    /** A Pending or Failed claim is deleted at this time (`TenantDomains:ClaimExpiryDays`); null while Active. */
    expiresAt: timestamp({ withTimezone: true }),
    /** When an Active domain lost the name to another tenant that proved ownership. */
    deactivatedAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    index("tenant_domains_tenant_idx").on(t.tenantId),
    uniqueIndex("tenant_domains_tenant_hostname_idx").on(t.tenantId, t.hostname),
    uniqueIndex("tenant_domains_active_hostname_idx").on(t.hostname).where(sql`${t.status} = 'Active'`),
    index("tenant_domains_expiry_idx").on(t.expiresAt).where(sql`${t.status} <> 'Active'`),
    // the loop's claim predicate: unverified domains, and Active ones whose certificate is not issued yet
    index("tenant_domains_due_idx")
      .on(t.nextCheckAt)
      .where(sql`${t.status} <> 'Active' or ${t.tlsStatus} is distinct from 'active'`),
    tenantIsolation(),
  ],
);
