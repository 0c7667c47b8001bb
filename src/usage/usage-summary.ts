import { eq } from "drizzle-orm";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { features } from "../db/schema/billing.ts";
import { ledgerTotal, periodAt, type UsageDeps, usageCounterKey } from "./counters.ts";

export interface UsageSummary {
  feature: string;
  period: string;
  periodStart: Date;
  periodEnd: Date | null;
  /** The ledger's total (the truth). */
  used: number;
  /** What the cache holds (null: no counter, or no cache). */
  cached: number | null;
}

/**
 * The ctx's tenant's usage of every metered feature in the current period: ledger and cached
 * counter side by side.
 */
export async function getUsageSummary(deps: UsageDeps, ctx: TenantCtx): Promise<UsageSummary[]> {
  const { tenantId } = ctx;
  const now = deps.clock.now();
  return withDatabase(deps, ctx, async (db) => {
    const metered = await db
      .select({ key: features.key, period: features.period })
      .from(features)
      .where(eq(features.kind, "metered"))
      .orderBy(features.key);
    const out: UsageSummary[] = [];
    for (const feature of metered) {
      const window = periodAt(feature.period, now);
      const used = await ledgerTotal(db, tenantId, feature.key, window);
      let cachedValue: number | null = null;
      if (deps.cache) {
        const hit = await deps.cache.get(usageCounterKey(tenantId, feature.key, window)).catch(() => null);
        cachedValue = hit === null ? null : Number(hit);
      }
      out.push({
        feature: feature.key,
        period: window.label,
        periodStart: window.start,
        periodEnd: window.end,
        used,
        cached: cachedValue,
      });
    }
    return out;
  });
}
