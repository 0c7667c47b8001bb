import { createIntervalRunner } from "../jobs/interval-runner.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { Telemetry } from "../telemetry/otel.ts";
import { type BackgroundLoop, intervalLoop, type LoopName } from "./background.ts";
import type { LoopStatusBoard } from "./loop-status.ts";

/** Wraps a loop's tick with the loop-round metrics (`plinth.loop.ticks`, `plinth.loop.tick.duration`). */
export function measuredTick<T>(
  telemetry: Telemetry,
  loop: string,
  tick: () => Promise<T>,
): () => Promise<T> {
  if (!telemetry.enabled) return tick;
  const m = telemetry.instruments;
  // both outcomes exist from the start: a dashboard's failure panel reads 0, not "no data"
  m.loopTicks.add(0, { loop, outcome: "error" });
  return async () => {
    const started = performance.now();
    let outcome = "ok";
    try {
      return await tick();
    } catch (error) {
      outcome = "error";
      throw error;
    } finally {
      m.loopTicks.add(1, { loop, outcome });
      m.loopTickDuration.record((performance.now() - started) / 1000, { loop });
    }
  };
}

/**
 * Starts one of the interval loops (tenant domains, subscriptions, usage reconciliation): every
 * `intervalMs` (at once again while `step` says there is more) it runs its domain step, measured.
 */
export function startIntervalLoop(
  deps: { logger: Logger; telemetry: Telemetry; loopStatus?: LoopStatusBoard },
  name: Exclude<LoopName, "jobs">,
  options: { intervalMs: number; step: () => Promise<boolean> },
): BackgroundLoop {
  return intervalLoop(
    name,
    createIntervalRunner({
      name,
      intervalMs: options.intervalMs,
      logger: deps.logger,
      tick: measuredTick(
        deps.telemetry,
        name,
        deps.loopStatus ? deps.loopStatus.wrap(name, options.step) : options.step,
      ),
    }),
  );
}
