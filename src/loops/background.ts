import { systemClock } from "../clock.ts";
import type { Settings } from "../config/schema.ts";
import { databaseClock } from "../db/database-clock.ts";
import type { Deps } from "../deps.ts";
import type { IntervalRunner } from "../jobs/interval-runner.ts";
import { createJobLoop, type JobLoop, type JobLoopOptions } from "../jobs/job-loop.ts";
import { createJobRegistry, type JobRegistry } from "../jobs/registry.ts";
import { jobMetrics, observeJobs } from "../jobs/telemetry.ts";

/** The background loops of the API process (spec 3.4, and the recurring schedules). */
export const loopNames = [
  "jobs",
  "tenantDomains",
  "subscriptions",
  "usageReconciliation",
  "schedules",
] as const;
export type LoopName = (typeof loopNames)[number];

/** Whether a loop runs: the master switch and the loop's own flag must both be on. */
export function loopEnabled(settings: Settings, name: LoopName): boolean {
  if (!settings.BackgroundProcessing.Enabled) return false;
  switch (name) {
    case "jobs":
      return settings.BackgroundProcessing.JobsEnabled;
    case "tenantDomains":
      return settings.TenantDomains.Enabled;
    case "subscriptions":
      return settings.SaasSubscriptions.Enabled;
    case "usageReconciliation":
      return settings.FeatureUsageReconciliation.Enabled;
    case "schedules":
      return settings.BackgroundProcessing.SchedulesEnabled;
  }
}

/** A running loop, as `startBackground` stops it. */
export interface BackgroundLoop {
  name: LoopName;
  /** Stop claiming; finish or give back work within `timeoutMs`. */
  stop(timeoutMs: number): Promise<void>;
}

/** Adapts an interval runner (a loop whose ticks claim with their own lease query) to a BackgroundLoop. */
export function intervalLoop(name: LoopName, runner: IntervalRunner): BackgroundLoop {
  runner.start();
  return {
    name,
    // a tick stuck on a connection the network dropped must not hold shutdown past its deadline
    stop: async (timeoutMs) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([runner.stop(), new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
      clearTimeout(timer);
    },
  };
}

export type LoopFactory = (deps: Deps) => BackgroundLoop | Promise<BackgroundLoop>;

export interface StartBackgroundOptions {
  /** Kinds this process runs; default the built-ins (`system.noop`). */
  registry?: JobRegistry;
  /** The other loops, added by their areas; each starts only when its flags allow. */
  loops?: Partial<Record<Exclude<LoopName, "jobs">, LoopFactory>>;
  /** Test overrides of the job loop (lease, clock-driven pruning, events). */
  jobLoop?: Partial<Omit<JobLoopOptions, "registry">>;
}

export interface Background {
  loops: BackgroundLoop[];
  jobLoop: JobLoop | null;
  /** Stops every loop; running jobs get `timeoutMs` to finish before they are released. */
  stop(timeoutMs: number): Promise<void>;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Job-loop options from configuration (`BackgroundProcessing:*`). */
export function jobLoopOptions(settings: Settings, registry: JobRegistry): JobLoopOptions {
  const bp = settings.BackgroundProcessing;
  return {
    registry,
    parallelism: bp.JobParallelism,
    batchSize: bp.JobBatchSize,
    localQueue: bp.JobLocalQueueSize,
    pollMs: bp.JobPollSeconds * 1000,
    retry: { baseMs: bp.JobRetryBaseSeconds * 1000, maxMs: bp.JobRetryMaxSeconds * 1000, jitter: 0.2 },
    retention: { succeededMs: bp.JobRetentionDays * DAY_MS, deadMs: bp.JobDeadRetentionDays * DAY_MS },
  };
}

/**
 * Starts the enabled background loops of this process (called by src/lifecycle.ts once it serves).
 * On the system clock, the loops time their leases by the database's clock (`databaseClock`), the
 * one clock every host shares; an injected clock (tests) is used as it is.
 */
export async function startBackground(
  processDeps: Deps,
  options: StartBackgroundOptions = {},
): Promise<Background> {
  const settings = processDeps.config.settings;
  const loops: BackgroundLoop[] = [];
  const anyLoop = loopNames.some((name) => loopEnabled(settings, name));
  const clock =
    anyLoop && processDeps.clock === systemClock
      ? await databaseClock(processDeps.database.db, processDeps.logger)
      : undefined;
  const deps: Deps = clock ? { ...processDeps, clock } : processDeps;
  let jobLoop: JobLoop | null = null;
  if (loopEnabled(settings, "jobs")) {
    // telemetry hook: handlers run in a span with one log line per run; loop events become metrics
    const registry = observeJobs(options.registry ?? createJobRegistry(), deps);
    const metrics = jobMetrics(deps.telemetry, registry.kinds());
    const onEvent = options.jobLoop?.onEvent;
    const loop = createJobLoop(deps, {
      ...jobLoopOptions(settings, registry),
      ...options.jobLoop,
      onEvent:
        metrics && onEvent
          ? (event) => {
              metrics(event);
              onEvent(event);
            }
          : (metrics ?? onEvent),
    });
    await loop.start();
    jobLoop = loop;
    loops.push({ name: "jobs", stop: async (timeoutMs) => void (await loop.stop(timeoutMs)) });
  }
  try {
    for (const [name, factory] of Object.entries(options.loops ?? {}) as [LoopName, LoopFactory][]) {
      if (loopEnabled(settings, name)) loops.push(await factory(deps));
    }
  } catch (error) {
    // a loop that failed to start leaves none running that no one could stop
    await Promise.allSettled(loops.map((l) => l.stop(0)));
    clock?.stop();
    throw error;
  }
  const disabled = loopNames.filter((n) => !loops.some((l) => l.name === n));
  deps.logger.info("background loops started", { running: loops.map((l) => l.name), off: disabled });
  return {
    loops,
    jobLoop,
    stop: async (timeoutMs) => {
      await Promise.allSettled(loops.map((l) => l.stop(timeoutMs)));
      clock?.stop();
    },
  };
}
