import { and, desc, eq, sql } from "drizzle-orm";
import { opaqueToken } from "../auth/secrets.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { tenantDomains, tenants } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { getTenant, isUuid } from "../tenancy/tenants.ts";
import { recordUsage } from "../usage/ledger.ts";
import { validateHostname, verificationRecordName } from "./hostnames.ts";
import { cnameTargets, gatewayClient } from "./settings.ts";

export type DomainDeps = Pick<Deps, "database" | "cache" | "clock" | "config" | "tenants" | "logger"> &
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

/**
 * `custom_domains` usage (all-time): +1 per domain added, −1 per domain removed, whoever did it
 * (operators' additions count toward the tenant's quota too). Keyed by the domain id, so a retried
 * call never counts twice; recorded in the transaction that adds or removes the domain.
 */
async function countDomain(
  deps: DomainDeps,
  tx: Executor,
  tenantId: string,
  domainId: string,
  quantity: 1 | -1,
) {
  await recordUsage(
    deps,
    {
      tenantId,
      feature: "custom_domains",
      quantity,
      idempotencyKey: `custom_domains:${quantity > 0 ? "added" : "removed"}:${domainId}`,
    },
    tx,
  );
}

/**
 * Adds a hostname to the tenant as Pending (due at once, with a fresh verification token) and counts
 * it in `custom_domains` usage, in one transaction. A tenant's own addition is held to its plan: 402
 * `payment_required` when the plan has no custom domains, 403 `usage_limit_reached` at the limit,
 * first from the usage counter, then by counting the tenant's domains under its row lock as the new
 * one is inserted, so concurrent additions cannot pass it (every domain row counts, whatever its
 * status). An operator acting `forPlatform` is not held to the plan; the domain still counts.
 */
export async function addCustomDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { hostname: string; forPlatform?: boolean },
): Promise<DomainView> {
  const tenantId = ctx.tenantId;
  const limit = input.forPlatform ? null : (await assertFeature(deps, tenantId, "custom_domains", 1)).limit;
  const settings = deps.config.settings;
  const hostname = validateHostname(input.hostname, {
    platformHost: settings.Tenancy.Resolution.PlatformHost,
    allowedHosts: settings.AllowedHosts,
  });
  await getTenant(deps.database.db, tenantId);
  const now = deps.clock.now();
  const row = await deps.database.db.transaction(async (tx) => {
    if (limit !== null) {
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
      .onConflictDoNothing({ target: [tenantDomains.tenantId, tenantDomains.hostname] })
      .returning();
    // one answer whichever tenant holds it: the name is taken
    if (!inserted) throw new AppError("conflict", "This hostname is already registered.");
    await countDomain(deps, tx, tenantId, inserted.id, 1);
    return inserted;
  });
  deps.logger.info("tenant domain added", { tenantId, domainId: row.id, hostname });
  return domainView(deps, row);
}

export async function listDomains(deps: DomainDeps, ctx: TenantCtx): Promise<DomainView[]> {
  const { tenantId } = ctx;
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

export async function getDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<DomainView> {
  return domainView(deps, await domainRow(deps, ctx.tenantId, input.id));
}

/**
 * Makes the domain due at the loop's next tick, whatever its backoff (a domain another process
 * is checking right now keeps its lease). An Active domain is re-checked only while its
 * certificate is not issued: the loop refreshes the TLS status, it never un-activates.
 */
export async function requestDomainCheck(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<DomainView> {
  const { tenantId } = ctx;
  const { id } = input;
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
 * Removes the domain from the TLS gateway, then from the database with its −1 of `custom_domains`
 * usage in one transaction (so a gateway outage leaves it in place to retry: 503). Without a
 * configured gateway only the record goes, with a warning when it had been registered.
 */
export async function removeCustomDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<void> {
  const { tenantId } = ctx;
  const id = input.id;
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
  await deps.database.db.transaction(async (tx) => {
    await tx.delete(tenantDomains).where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)));
    await countDomain(deps, tx, tenantId, id, -1);
  });
  deps.tenants.clear();
  deps.logger.info("tenant domain removed", { tenantId, domainId: id, hostname: row.hostname });
}
