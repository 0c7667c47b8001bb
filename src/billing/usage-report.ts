import type { TenantCtx } from "../context.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { listUsageCorrections } from "../usage/list-usage-corrections.ts";
import { getUsageSummary } from "../usage/usage-summary.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { cachedTenantFeatures } from "./entitlements.ts";

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

/** The ctx's tenant's current-period usage per metered feature (ledger and cached counter, with the limit) and recent corrections. */
export async function getUsageReport(deps: BillingDeps, ctx: TenantCtx): Promise<UsageReport> {
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const [usage, entitlements, corrections] = await Promise.all([
    getUsageSummary(deps, ctx),
    cachedTenantFeatures(deps, ctx),
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
    corrections: corrections.items.map((r) => ({
      feature: r.featureKey,
      periodStart: r.periodStart,
      ledgerTotal: r.ledgerTotal,
      cachedBefore: r.cachedBefore,
      reason: r.reason,
      correctedAt: r.correctedAt,
    })),
  };
}
