import { runSubscriptionBatch } from "../billing/subscriptions.ts";
import type { Deps } from "../deps.ts";
import { type BackgroundLoop, intervalLoop, type LoopFactory } from "./background.ts";
import { createIntervalRunner } from "./interval-runner.ts";

/**
 * The subscription loop (`SaasSubscriptions:*`) on the shared interval runner: every `PollSeconds`
 * it moves due subscriptions in batches of `BatchSize` (see `runSubscriptionBatch`).
 */
export function subscriptionsLoop(options: { intervalMs?: number } = {}): LoopFactory {
  return (deps: Deps): BackgroundLoop => {
    const settings = deps.config.settings.SaasSubscriptions;
    return intervalLoop(
      "subscriptions",
      createIntervalRunner({
        name: "subscriptions",
        intervalMs: options.intervalMs ?? settings.PollSeconds * 1000,
        logger: deps.logger,
        tick: async () => (await runSubscriptionBatch(deps, { batchSize: settings.BatchSize })).more,
      }),
    );
  };
}
