import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import type { UsagePeriod } from "../db/schema/billing.ts";
import {
  counterTtlSeconds,
  ledgerTotal,
  lockCounter,
  periodAt,
  type UsageDeps,
  type UsagePeriodWindow,
  usageCounterKey,
} from "./counters.ts";

/**
 * The ctx's tenant's current usage of a metered feature, for limit checks: the cached counter,
 * rebuilt from the ledger when it is missing (under the exclusive counter lock, so no increment is
 * lost). Without a cache, or when the cache fails, the ledger is read.
 */
export async function getCurrentUsage(
  deps: UsageDeps,
  ctx: TenantCtx,
  input: { feature: string; period: UsagePeriod },
): Promise<number> {
  const { tenantId } = ctx;
  const window = periodAt(input.period, deps.clock.now());
  const fromLedger = () => withDatabase(deps, ctx, (db) => ledgerTotal(db, tenantId, input.feature, window));
  if (!deps.cache) return fromLedger();
  try {
    const hit = await deps.cache.get(usageCounterKey(tenantId, input.feature, window));
    if (hit !== null) return Number(hit);
  } catch (error) {
    deps.logger.warn("usage counter read failed; reading the ledger", {
      error: error instanceof Error ? error.message : String(error),
    });
    return fromLedger();
  }
  return rebuildCounter(deps, ctx, input.feature, window);
}

/** Sets the counter to the ledger total while no increment is in flight; returns the total. */
async function rebuildCounter(
  deps: UsageDeps,
  ctx: TenantCtx,
  feature: string,
  window: UsagePeriodWindow,
): Promise<number> {
  const { tenantId } = ctx;
  const cache = deps.cache;
  return withTransaction(deps, ctx, async (tx) => {
    await lockCounter(tx, tenantId, feature, window, "exclusive");
    const total = await ledgerTotal(tx, tenantId, feature, window);
    if (cache) {
      try {
        await cache.set(
          usageCounterKey(tenantId, feature, window),
          String(total),
          counterTtlSeconds(window, deps.clock.now()),
        );
      } catch (error) {
        deps.logger.warn("usage counter rebuild could not write the cache", {
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
    return total;
  });
}
