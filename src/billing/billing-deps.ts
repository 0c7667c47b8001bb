import type { Cache } from "../cache/port.ts";
import type { Clock } from "../clock.ts";
import type { Settings } from "../config/schema.ts";
import type { Database } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";

/** What the billing operations need of Deps. */
export interface BillingDeps {
  database: Database;
  cache: Cache | null;
  clock: Clock;
  logger: Logger;
  config: { settings: Settings };
}

/** What a subscription change needs besides the transaction: the clock and the grace and job settings. */
export interface TransitionContext {
  clock: Clock;
  graceDays: number;
  defaultMaxAttempts?: number;
}

export function transitionContext(deps: BillingDeps): TransitionContext {
  return {
    clock: deps.clock,
    graceDays: deps.config.settings.SaasSubscriptions.PastDueGraceDays,
    defaultMaxAttempts: deps.config.settings.BackgroundProcessing.JobMaxAttempts,
  };
}
