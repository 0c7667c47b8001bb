import type { Clock } from "../clock.ts";
import type { Executor } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";
import { createIntervalRunner, type IntervalRunner } from "./interval-runner.ts";
import { pruneFinishedJobs } from "./upkeep.ts";

/** The job loop's retention round (`jobs-prune`), every `intervalMs` (default ten minutes). */
export function createJobPruner(
  deps: { db: Executor; clock: Clock; logger: Logger },
  options: {
    succeededMs: number;
    deadMs: number;
    intervalMs?: number;
    kinds: string[];
    leaseMs: number;
    random: () => number;
    onPruned: (count: number) => void;
  },
): IntervalRunner {
  return createIntervalRunner({
    name: "jobs-prune",
    intervalMs: options.intervalMs ?? 10 * 60_000,
    logger: deps.logger,
    random: options.random,
    tick: async () => {
      const count = await pruneFinishedJobs(deps, options);
      if (count > 0) options.onPruned(count);
    },
  });
}
