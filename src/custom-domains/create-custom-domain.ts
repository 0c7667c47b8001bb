import { eq, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { opaqueToken } from "../auth/opaque-tokens.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import { execute, type Tx } from "../db/client.ts";
import { withTransaction } from "../db/operation.ts";
import { tenantDomains, tenants } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { countResource } from "../usage/record-usage.ts";
import { claimExpiry, type DomainDeps } from "./domain-rows.ts";
import { type DomainView, domainView } from "./domain-view.ts";
import { validateHostname } from "./hostname-policy.ts";

/** 403 once the tenant holds `limit` domains, counted under its row lock (so concurrent additions cannot pass it). */
async function assertUnderLimit(tx: Tx, tenantId: string, limit: number): Promise<void> {
  await tx.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).for("update");
  const [held] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(tenantDomains)
    .where(eq(tenantDomains.tenantId, tenantId));
  if ((held?.n ?? 0) >= limit)
    throw new AppError("usage_limit_reached", `The limit of "custom_domains" (${limit} domains) is reached.`);
}

/**
 * Adds a hostname to the ctx's tenant as Pending (due at once, with a fresh verification token of
 * its own, expiring after `TenantDomains:ClaimExpiryDays` unless verified) and counts it in
 * `custom_domains` usage, in one transaction. Verified ownership decides, not first come: another
 * tenant's claim on the name (Pending or Active) neither refuses this one nor is revealed; the
 * first claim to verify becomes Active, and an Active name moves only to a tenant that proves
 * ownership with its own TXT record (activate-claimed-domain.ts). 409 only when this tenant has the
 * name already. A tenant's own addition is held to its plan: 402 `payment_required` when the plan
 * has no custom domains, 403 `usage_limit_reached` at the limit, first from the usage counter, then
 * by counting the tenant's domains under its row lock as the new one is inserted (every domain row
 * counts, whatever its status). An operator acting `forPlatform` is not held to the plan; the
 * domain still counts.
 */
export async function createCustomDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { hostname: string; forPlatform?: boolean },
): Promise<DomainView> {
  const tenantId = ctx.tenantId;
  const limit = input.forPlatform
    ? null
    : (await assertFeature(deps, ctx, { feature: "custom_domains" })).limit;
  const settings = deps.config.settings;
  const hostname = validateHostname(input.hostname, {
    platformHost: settings.Tenancy.Resolution.PlatformHost,
    allowedHosts: settings.AllowedHosts,
    deniedSuffixes: settings.TenantDomains.DeniedSuffixes,
  });
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const now = deps.clock.now();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    if (limit !== null) await assertUnderLimit(tx, tenantId, limit);
    // a deleted tenant's hostnames stay out of reach for Tenancy:ReservedDays (docs/tenant-lifecycle.md)
    const [reserved] = await execute(
      tx,
      sql`select 1 from tenant_reservations where kind = 'host' and value = ${hostname} and reserved_until > ${now.toISOString()}::timestamptz`,
    );
    if (reserved) throw new AppError("conflict", "This hostname is reserved: it served a deleted tenant.");
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
    await countResource(deps, txCtx, { feature: "custom_domains", id: inserted.id, quantity: 1 });
    await recordAudit(tx, txCtx, {
      action: "domain.added",
      target: { type: "domain", id: inserted.id },
      details: { hostname },
    });
    return inserted;
  });
  deps.logger.info("tenant domain added", { tenantId, domainId: row.id, hostname });
  return domainView(deps, row);
}
