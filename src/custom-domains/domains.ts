import { and, desc, eq, lte, ne, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { opaqueToken } from "../auth/secrets.ts";
import { assertFeature } from "../billing/entitlements.ts";
import { type Ctx, systemCtx, type TenantCtx } from "../context.ts";
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
  /** When a Pending or Failed claim is removed; null while Active. */
  expiresAt: string | null;
  deactivatedAt: string | null;
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
    expiresAt: row.status === "Active" ? null : iso(row.expiresAt),
    deactivatedAt: iso(row.deactivatedAt),
    createdAt: row.createdAt.toISOString(),
  };
}

/**
 * `custom_domains` usage (all-time): +1 per domain added, −1 per domain removed, whoever did it
 * (operators' additions count toward the tenant's quota too). Keyed by the domain id, so a retried
 * call never counts twice; recorded in the transaction that adds or removes the domain.
 */
export async function countDomain(
  deps: Pick<DomainDeps, "database" | "cache" | "clock" | "logger">,
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

/** When a claim made or failed at `now` is removed: `TenantDomains:ClaimExpiryDays` later. */
export function claimExpiry(deps: Pick<DomainDeps, "config">, now: Date): Date {
  return new Date(now.getTime() + deps.config.settings.TenantDomains.ClaimExpiryDays * 86_400_000);
}

/**
 * Adds a hostname to the tenant as Pending (due at once, with a fresh verification token of its
 * own, expiring after `TenantDomains:ClaimExpiryDays` unless verified) and counts it in
 * `custom_domains` usage, in one transaction. Verified ownership decides, not first come: another
 * tenant's claim on the name (Pending or Active) neither refuses this one nor is revealed; the
 * first claim to verify becomes Active, and an Active name moves only to a tenant that proves
 * ownership with its own TXT record (checks.ts). 409 only when this tenant has the name already. A tenant's own addition is held to its plan: 402
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
    deniedSuffixes: settings.TenantDomains.DeniedSuffixes,
  });
  await getTenant(deps, ctx, { tenantId });
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
        expiresAt: claimExpiry(deps, now),
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing({ target: [tenantDomains.tenantId, tenantDomains.hostname] })
      .returning();
    // only this tenant's own claim conflicts: other tenants' claims are not revealed
    if (!inserted) throw new AppError("conflict", "This tenant has already added this hostname.");
    await countDomain(deps, tx, tenantId, inserted.id, 1);
    await recordAudit(tx, ctx, {
      action: "domain.added",
      target: { type: "domain", id: inserted.id },
      details: { hostname },
    });
    return inserted;
  });
  deps.logger.info("tenant domain added", { tenantId, domainId: row.id, hostname });
  return domainView(deps, row);
}

export async function listDomains(deps: DomainDeps, ctx: TenantCtx): Promise<DomainView[]> {
  const { tenantId } = ctx;
  await getTenant(deps, ctx, { tenantId });
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
  const row = await deps.database.db.transaction(async (tx) => {
    const [updated] = await tx
      .update(tenantDomains)
      .set({ nextCheckAt: now, updatedAt: now })
      .where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)))
      .returning();
    if (!updated) throw new AppError("not_found", "No such domain.");
    await recordAudit(tx, ctx, {
      action: "domain.check_requested",
      target: { type: "domain", id },
      details: { hostname: updated.hostname },
    });
    return updated;
  });
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
  const gateway = (await activeElsewhere(deps.database.db, row))
    ? null // the gateway entry serves another tenant that owns the name now: leave it
    : gatewayClient(deps.config.settings.TenantDomains, deps.logger, deps.fetch);
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
  } else if (row.gatewayHostnameId && !(await activeElsewhere(deps.database.db, row))) {
    deps.logger.warn("tenant domain removed without a configured gateway: remove it there by hand", {
      domainId: id,
      hostname: row.hostname,
      gatewayHostnameId: row.gatewayHostnameId,
    });
  }
  await deps.database.db.transaction(async (tx) => {
    await tx.delete(tenantDomains).where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)));
    await countDomain(deps, tx, tenantId, id, -1);
    await recordAudit(tx, ctx, {
      action: "domain.removed",
      target: { type: "domain", id },
      details: { hostname: row.hostname },
    });
  });
  deps.tenants.clear();
  deps.logger.info("tenant domain removed", { tenantId, domainId: id, hostname: row.hostname });
}

/** Whether another tenant's claim on the row's hostname is Active. */
export async function activeElsewhere(db: Executor, row: { id: string; hostname: string }): Promise<boolean> {
  const [other] = await db
    .select({ id: tenantDomains.id })
    .from(tenantDomains)
    .where(
      and(
        eq(tenantDomains.hostname, row.hostname),
        eq(tenantDomains.status, "Active"),
        ne(tenantDomains.id, row.id),
      ),
    )
    .limit(1);
  return other !== undefined;
}

/**
 * Removes Pending and Failed claims whose time is up (`expires_at`), each with its −1 of
 * `custom_domains` usage in the transaction that deletes it; resolves how many went. Run by the
 * tenant-domain loop each tick. A claim never reaches the gateway before it is Active, and a
 * domain that lost its name has its gateway id cleared, so nothing is removed there.
 */
export async function expireDomainClaims(
  deps: Pick<DomainDeps, "database" | "cache" | "clock" | "logger">,
  limit: number,
): Promise<number> {
  const now = deps.clock.now();
  const due = await deps.database.db
    .select({ id: tenantDomains.id, tenantId: tenantDomains.tenantId, hostname: tenantDomains.hostname })
    .from(tenantDomains)
    .where(and(ne(tenantDomains.status, "Active"), lte(tenantDomains.expiresAt, now)))
    .limit(limit);
  let removed = 0;
  for (const claim of due) {
    const gone = await deps.database.db.transaction(async (tx) => {
      const rows = await tx
        .delete(tenantDomains)
        .where(
          and(
            eq(tenantDomains.id, claim.id),
            ne(tenantDomains.status, "Active"),
            lte(tenantDomains.expiresAt, now),
          ),
        )
        .returning({ id: tenantDomains.id });
      if (rows.length === 0) return false;
      await countDomain(deps, tx, claim.tenantId, claim.id, -1);
      await recordAudit(tx, systemCtx("tenant-domains", claim.tenantId), {
        action: "domain.removed",
        target: { type: "domain", id: claim.id },
        details: { hostname: claim.hostname, reason: "claim expired" },
      });
      return true;
    });
    if (gone) {
      removed++;
      deps.logger.info("tenant domain claim expired", {
        tenantId: claim.tenantId,
        domainId: claim.id,
        hostname: claim.hostname,
      });
    }
  }
  return removed;
}

/** A domain across tenants, for platform staff: the domain view and its tenant's code. */
export interface PlatformDomainView extends DomainView {
  tenantCode: string;
}

/**
 * Every tenant's custom domains, for platform staff, newest first: by state (`notActive`: Pending
 * and Failed together), at most `limit` (1–500, default 200).
 */
export async function listPlatformDomains(
  deps: Pick<DomainDeps, "database" | "config">,
  _ctx: Ctx,
  input: { status?: DomainView["status"]; notActive?: boolean; limit?: number } = {},
): Promise<PlatformDomainView[]> {
  const limit = Math.min(500, Math.max(1, input.limit ?? 200));
  const rows = await deps.database.db
    .select({ domain: tenantDomains, tenantCode: tenants.code })
    .from(tenantDomains)
    .innerJoin(tenants, eq(tenants.id, tenantDomains.tenantId))
    .where(
      input.status
        ? eq(tenantDomains.status, input.status)
        : input.notActive
          ? ne(tenantDomains.status, "Active")
          : undefined,
    )
    .orderBy(desc(tenantDomains.createdAt), tenantDomains.hostname)
    .limit(limit);
  return rows.map((r) => ({ ...domainView(deps, r.domain), tenantCode: r.tenantCode }));
}
