import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Deps } from "../deps.ts";
import { reconcileUsageBatch } from "../usage/reconcile.ts";
import { type BackgroundLoop, intervalLoop, type LoopFactory } from "./background.ts";
import { createIntervalRunner } from "./interval-runner.ts";

/**
 * The feature-usage reconciliation loop (`FeatureUsageReconciliation:*`): every `IntervalMinutes` it
 * reconciles the due counters in batches of `BatchSize` until none is left (see `reconcileUsageBatch`).
 */
export function usageReconciliationLoop(options: { intervalMs?: number } = {}): LoopFactory {
  return (deps: Deps): BackgroundLoop => {
    const settings = deps.config.settings.FeatureUsageReconciliation;
    const intervalMs = settings.IntervalMinutes * 60_000;
    const workerId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    return intervalLoop(
      "usageReconciliation",
      createIntervalRunner({
        name: "usageReconciliation",
        intervalMs: options.intervalMs ?? intervalMs,
        logger: deps.logger,
        tick: async () =>
          (await reconcileUsageBatch(deps, { batchSize: settings.BatchSize, intervalMs, workerId })).more,
      }),
    );
  };
}
