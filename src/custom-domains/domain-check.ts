import { and, eq, sql } from "drizzle-orm";
import type { Ctx, TenantCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { tenantDomains } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { type ClaimedDomain, timestamptz } from "./claim-due-domains.ts";
import type { DnsResolver } from "./dns.ts";
import type { GatewayClient } from "./gateway.ts";
import type { DomainSettings } from "./settings.ts";

export type DomainCheckDeps = Pick<Deps, "database" | "cache" | "clock" | "config" | "tenants" | "logger"> &
  Partial<Pick<Deps, "fetch">>;

/** What a check talks to besides the database. */
export interface DomainCheckServices {
  resolver: DnsResolver;
  gateway: GatewayClient;
}

/** One round of checks: the ctx it runs in, who holds the leases, and the services it uses. */
export interface DomainCheck {
  deps: DomainCheckDeps;
  ctx: Ctx;
  owner: string;
  settings: DomainSettings;
  /** Normalised allowed CNAME targets (non-empty). */
  targets: string[];
  services: DomainCheckServices;
}

/** Where a check left a domain, and why not further (null: nothing failed). */
export interface CheckResult {
  status: ClaimedDomain["status"];
  code: string | null;
}

/** The check's ctx in the domain's tenant (its audit chain). */
export const domainCtx = (check: DomainCheck, domain: ClaimedDomain): TenantCtx => ({
  ...check.ctx,
  tenantId: domain.tenantId,
});

type DomainUpdate = Omit<Partial<typeof tenantDomains.$inferInsert>, "nextCheckAt"> & { nextCheckAt: Date };

/** Stores a check's result and releases the lease, fenced on it; false when the lease or the row is gone. */
export async function finishCheck(
  check: DomainCheck,
  db: Executor,
  domain: ClaimedDomain,
  set: DomainUpdate,
): Promise<boolean> {
  // a check requested while we held the lease (POST …/check) wins over our backoff
  const nextCheckAt = sql`case when ${tenantDomains.nextCheckAt} > ${domain.dueAt}::timestamptz
    then ${tenantDomains.nextCheckAt} else ${timestamptz(set.nextCheckAt)} end`;
  const rows = await db
    .update(tenantDomains)
    .set({ ...set, nextCheckAt, lockedBy: null, lockedUntil: null, updatedAt: check.deps.clock.now() })
    .where(and(eq(tenantDomains.id, domain.id), eq(tenantDomains.lockedBy, check.owner)))
    .returning({ id: tenantDomains.id });
  return rows.length > 0;
}
