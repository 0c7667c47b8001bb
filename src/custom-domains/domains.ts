import { and, desc, eq, sql } from "drizzle-orm";
import { opaqueToken } from "../auth/secrets.ts";
import { tenantDomains, tenants } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { getTenant, isUuid } from "../tenancy/tenants.ts";
import { validateHostname, verificationRecordName } from "./hostnames.ts";
import { cnameTargets, gatewayClient } from "./settings.ts";

export type DomainDeps = Pick<Deps, "database" | "clock" | "config" | "tenants" | "logger"> &
  Partial<Pick<Deps, "fetch">>;
type DomainRow = typeof tenantDomains.$inferSelect;

/** A domain as admins and tenant owners see it: what to set in DNS, and where it stands. */
export interface DomainView {
  id: string;
  tenantId: string;
  hostname: string;
  status: "Pending" | "Failed" | "Active";
  verification: { type: "TXT"; name: string; value: string };
  /** Point the hostname's CNAME at one of these. */
  cnameTargets: string[];
  /** The CNAME target seen at the last check. */
  cnameTarget: string | null;
  /** The gateway's view: DNS success alone does not mean a certificate is issued. */
  tls: { gatewayHostnameId: string | null; hostnameStatus: string | null; certificateStatus: string | null };
  lastFailure: { code: string; reason: string } | null;
  lastCheckedAt: string | null;
  nextCheckAt: string | null;
  checkAttempts: number;
  activatedAt: string | null;
  createdAt: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function domainView(deps: Pick<Deps, "config">, row: DomainRow): DomainView {
  const s = deps.config.settings.TenantDomains;
  const due = row.status !== "Active" || row.tlsStatus !== "active";
  return {
    id: row.id,
    tenantId: row.tenantId,
    hostname: row.hostname,
    status: row.status,
    verification: {
      type: "TXT",
      name: verificationRecordName(s.VerificationRecordPrefix, row.hostname),
      value: row.verificationToken,
    },
    cnameTargets: cnameTargets(s),
    cnameTarget: row.cnameTarget,
    tls: {
      gatewayHostnameId: row.gatewayHostnameId,
      hostnameStatus: row.gatewayStatus,
      certificateStatus: row.tlsStatus,
    },
    lastFailure:
      row.lastFailureCode && row.status !== "Active"
        ? { code: row.lastFailureCode, reason: row.lastFailureReason ?? row.lastFailureCode }
        : null,
    lastCheckedAt: iso(row.lastCheckedAt),
    nextCheckAt: due ? iso(row.nextCheckAt) : null,
    checkAttempts: row.checkAttempts,
    activatedAt: iso(row.activatedAt),
    createdAt: row.createdAt.toISOString(),
  };
}

/** Adds a hostname to a tenant as `Pending` with a fresh verification token; due at once. */
/**
 * Registers a hostname for a tenant as Pending. With `limit` (the plan's `custom_domains` limit),
 * the count of the tenant's domains and the insert happen under the tenant's row lock, so
 * concurrent additions cannot take the tenant past it: the (n+1)-th gets 403
 * `usage_limit_reached` however many arrive at once. Every domain row counts, whatever its status.
 */
export async function createDomain(
  deps: DomainDeps,
  tenantId: string,
  input: { hostname: string },
  options: { limit?: number | null } = {},
): Promise<DomainView> {
  const settings = deps.config.settings;
  const hostname = validateHostname(input.hostname, {
    platformHost: settings.Tenancy.Resolution.PlatformHost,
    allowedHosts: settings.AllowedHosts,
  });
  await getTenant(deps.database.db, tenantId);
  const now = deps.clock.now();
  const row = await deps.database.db.transaction(async (tx) => {
    const limit = options.limit;
    if (limit !== undefined && limit !== null) {
      await tx.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).for("update");
      const [held] = await tx
        .select({ n: sql<number>`count(*)::int` })
        .from(tenantDomains)
        .where(eq(tenantDomains.tenantId, tenantId));
      if ((held?.n ?? 0) >= limit)
        throw new AppError(
          "usage_limit_reached",
          `The limit of "custom_domains" (${limit} domains) is reached.`,
        );
    }
    const [inserted] = await tx
      .insert(tenantDomains)
      .values({
        tenantId,
        hostname,
        status: "Pending",
        verificationToken: `plinth-${opaqueToken(24)}`,
        nextCheckAt: now,
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing({ target: tenantDomains.hostname })
      .returning();
    return inserted;
  });
  // one answer whichever tenant holds it: the name is taken
  if (!row) throw new AppError("conflict", "This hostname is already registered.");
  deps.logger.info("tenant domain added", { tenantId, domainId: row.id, hostname });
  return domainView(deps, row);
}

export async function listDomains(deps: DomainDeps, tenantId: string): Promise<DomainView[]> {
  await getTenant(deps.database.db, tenantId);
  const rows = await deps.database.db
    .select()
    .from(tenantDomains)
    .where(eq(tenantDomains.tenantId, tenantId))
    .orderBy(desc(tenantDomains.createdAt), tenantDomains.hostname);
  return rows.map((row) => domainView(deps, row));
}

async function domainRow(deps: DomainDeps, tenantId: string, id: string): Promise<DomainRow> {
  if (!isUuid(id) || !isUuid(tenantId)) throw new AppError("not_found", "No such domain.");
  const [row] = await deps.database.db
    .select()
    .from(tenantDomains)
    .where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)));
  if (!row) throw new AppError("not_found", "No such domain.");
  return row;
}

export async function getDomain(deps: DomainDeps, tenantId: string, id: string): Promise<DomainView> {
  return domainView(deps, await domainRow(deps, tenantId, id));
}

/**
 * Makes the domain due at the loop's next tick, whatever its backoff (a domain another process
 * is checking right now keeps its lease). An Active domain is re-checked only while its
 * certificate is not issued: the loop refreshes the TLS status, it never un-activates.
 */
export async function requestDomainCheck(
  deps: DomainDeps,
  tenantId: string,
  id: string,
): Promise<DomainView> {
  await domainRow(deps, tenantId, id);
  const now = deps.clock.now();
  const [row] = await deps.database.db
    .update(tenantDomains)
    .set({ nextCheckAt: now, updatedAt: now })
    .where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)))
    .returning();
  if (!row) throw new AppError("not_found", "No such domain.");
  return domainView(deps, row);
}

/**
 * Removes the domain from the TLS gateway, then from the database (so a gateway outage leaves it
 * in place to retry: 503). Without a configured gateway only the record goes, with a warning when
 * it had been registered.
 */
export async function deleteDomain(deps: DomainDeps, tenantId: string, id: string): Promise<void> {
  const row = await domainRow(deps, tenantId, id);
  const gateway = gatewayClient(deps.config.settings.TenantDomains, deps.logger, deps.fetch);
  if (gateway) {
    try {
      await gateway.remove({ id: row.gatewayHostnameId, hostname: row.hostname });
    } catch (error) {
      deps.logger.warn("tenant domain not removed: the gateway did not confirm", {
        domainId: id,
        error: (error as Error).message,
      });
      throw new AppError("unavailable", "The TLS gateway did not confirm the removal; try again.");
    }
  } else if (row.gatewayHostnameId) {
    deps.logger.warn("tenant domain removed without a configured gateway: remove it there by hand", {
      domainId: id,
      hostname: row.hostname,
      gatewayHostnameId: row.gatewayHostnameId,
    });
  }
  await deps.database.db
    .delete(tenantDomains)
    .where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)));
  deps.tenants.clear();
  deps.logger.info("tenant domain removed", { tenantId, domainId: id, hostname: row.hostname });
}
