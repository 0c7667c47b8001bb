import { systemCtx } from "../context.ts";
import { workerId } from "../runtime/worker-id.ts";
import { reconcileUsageBatch } from "../usage/reconcile.ts";
import type { LoopFactory } from "./background.ts";
import { startIntervalLoop } from "./interval-loop.ts";

/**
 * The feature-usage reconciliation loop (`FeatureUsageReconciliation:*`): every `IntervalMinutes`
 * it reconciles the due counters in batches of `BatchSize` until none is left (`reconcileUsageBatch`).
 */
export function usageReconciliationLoop(options: { intervalMs?: number } = {}): LoopFactory {
  return (deps) => {
    const settings = deps.config.settings.FeatureUsageReconciliation;
    const intervalMs = settings.IntervalMinutes * 60_000;
    const owner = workerId();
    const ctx = systemCtx("usage-reconciliation");
    return startIntervalLoop(deps, "usageReconciliation", {
      intervalMs: options.intervalMs ?? intervalMs,
      step: async () =>
        (
          await reconcileUsageBatch(deps, ctx, {
            batchSize: settings.BatchSize,
            intervalMs,
            workerId: owner,
          })
        ).more,
    });
  };
}
