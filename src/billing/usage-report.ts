import type { TenantCtx } from "../context.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { getTenantUsage } from "../usage/ledger.ts";
import { listUsageCorrections } from "../usage/reconcile.ts";
import { getTenantFeatures } from "./entitlements.ts";
import type { BillingDeps } from "./subscriptions.ts";

/** How many of the latest counter corrections the report shows. */
const CORRECTIONS_SHOWN = 50;

export interface UsageReport {
  items: {
    feature: string;
    period: string;
    used: number;
    cached: number | null;
    limit: number | null;
    enabled: boolean;
  }[];
  corrections: {
    feature: string;
    periodStart: Date;
    ledgerTotal: number;
    cachedBefore: number | null;
    reason: string;
    correctedAt: Date;
  }[];
}

/** Current-period usage per metered feature (ledger and cached counter, with the limit) and recent corrections. */
export async function getUsageReport(deps: BillingDeps, ctx: TenantCtx): Promise<UsageReport> {
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const [usage, entitlements, corrections] = await Promise.all([
    getTenantUsage(deps, ctx.tenantId),
    getTenantFeatures(deps, ctx.tenantId),
    listUsageCorrections(deps, ctx, { limit: CORRECTIONS_SHOWN }),
  ]);
  return {
    items: usage.map((u) => ({
      feature: u.feature,
      period: u.period,
      used: u.used,
      cached: u.cached,
      limit: entitlements.features[u.feature]?.limit ?? null,
      enabled: entitlements.features[u.feature]?.enabled ?? false,
    })),
    corrections: corrections.map((r) => ({
      feature: r.featureKey,
      periodStart: r.periodStart,
      ledgerTotal: r.ledgerTotal,
      cachedBefore: r.cachedBefore,
      reason: r.reason,
      correctedAt: r.correctedAt,
    })),
  };
}
