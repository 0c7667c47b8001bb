import { runSubscriptionBatch } from "../billing/run-subscription-batch.ts";
import { systemCtx } from "../context.ts";
import type { LoopFactory } from "./background.ts";
import { startIntervalLoop } from "./interval-loop.ts";

/**
 * The subscription loop (`SaasSubscriptions:*`): every `PollSeconds` it moves due subscriptions in
 * batches of `BatchSize` (`runSubscriptionBatch`), at once again while there are more.
 */
export function subscriptionsLoop(options: { intervalMs?: number } = {}): LoopFactory {
  return (deps) => {
    const settings = deps.config.settings.SaasSubscriptions;
    const ctx = systemCtx("subscriptions");
    return startIntervalLoop(deps, "subscriptions", {
      intervalMs: options.intervalMs ?? settings.PollSeconds * 1000,
      step: async () => (await runSubscriptionBatch(deps, ctx, { batchSize: settings.BatchSize })).more,
    });
  };
}
