import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Clock } from "../clock.ts";
import type { Database } from "../db/client.ts";
import { describeIssues, JOBS_CHANNEL } from "../jobs/enqueue.ts";
import {
  type ClaimedJob,
  completeAndClaimJobs,
  completeJobs,
  DEFAULT_RETRY_POLICY,
  describeJobError,
  failJob,
  type JobLease,
  LEASE_MS,
  orphanedJobKinds,
  pruneJobs,
  type RetryPolicy,
  releaseJobs,
  retryDelayMs,
} from "../jobs/queue.ts";
import type { JobRegistry } from "../jobs/registry.ts";
import type { Redactor } from "../redact.ts";
import type { Logger } from "../telemetry/logger.ts";
import { createIntervalRunner, type IntervalRunner } from "./interval-runner.ts";

/** What the job loop reports, for metrics (OpenTelemetry hooks in here once telemetry exists). */
export type JobEvent =
  | { type: "claimed"; count: number; requested: number; durationMs: number }
  | { type: "succeeded"; id: number; kind: string; attempt: number; durationMs: number }
  | { type: "failed"; id: number; kind: string; attempt: number; retryAt: Date; durationMs: number }
  | { type: "dead"; id: number; kind: string; attempt: number; reason: string }
  /** A run whose lease another worker took over: its result was not recorded. */
  | { type: "lost"; id: number; kind: string; attempt: number }
  | { type: "released"; ids: number[] }
  | { type: "pruned"; count: number };

export interface JobLoopDeps {
  database: Database;
  clock: Clock;
  logger: Logger;
  redactor: Redactor;
}

export interface JobLoopOptions {
  registry: JobRegistry;
  /** `BackgroundProcessing:JobParallelism`. */
  parallelism: number;
  /** `BackgroundProcessing:JobBatchSize`. */
  batchSize: number;
  /** `BackgroundProcessing:JobPollSeconds`, in ms. */
  pollMs: number;
  retry?: RetryPolicy;
  /** Retention of finished jobs; pruning is off without it. */
  retention?: { succeededMs: number; deadMs: number; intervalMs?: number };
  /** Wake on NOTIFY (default true). Polling works without it, e.g. behind a transaction pooler. */
  listen?: boolean;
  workerId?: string;
  /** Tests shorten the lease; production uses the spec's five minutes. */
  leaseMs?: number;
  onEvent?: (event: JobEvent) => void;
  random?: () => number;
}

export interface JobLoop {
  readonly workerId: string;
  start(): Promise<void>;
  /** Claim now instead of at the next poll. */
  wake(): void;
  /**
   * Stops claiming, lets running jobs finish for up to `timeoutMs`, then aborts and releases the
   * rest (attempt not counted, due at once) so another process takes them immediately.
   */
  stop(timeoutMs: number): Promise<{ finished: number; released: number[] }>;
  /** Jobs whose handler is running now. */
  running(): number;
  readonly listening: boolean;
}

interface Completion {
  lease: JobLease;
  job: ClaimedJob;
  startedAt: number;
}

interface Run {
  job: ClaimedJob;
  controller: AbortController;
  done: Promise<void>;
  released: boolean;
}

export function defaultWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/** Before the lease ends the handler's signal fires, leaving this much for it to stop and report. */
function abortMargin(leaseMs: number): number {
  return Math.min(30_000, Math.floor(leaseMs / 10));
}

export function createJobLoop(deps: JobLoopDeps, options: JobLoopOptions): JobLoop {
  const { database, clock, logger } = deps;
  const db = database.db;
  const workerId = options.workerId ?? defaultWorkerId();
  const kinds = options.registry.kinds();
  const leaseMs = options.leaseMs ?? LEASE_MS;
  const retry = options.retry ?? DEFAULT_RETRY_POLICY;
  const random = options.random ?? Math.random;
  const emit = (event: JobEvent) => {
    try {
      options.onEvent?.(event);
    } catch (error) {
      logger.warn("job event hook failed", { error });
    }
  };
  const log = logger.child({ loop: "jobs", workerId });

  const runs = new Map<number, Run>();
  /** Slots promised to the statement in flight. */
  let reserved = 0;
  /** A claim came back full, or a NOTIFY or poll said there may be work: claim when a slot frees. */
  let moreMaybe = true;
  let hintGeneration = 0;
  let stopping = false;
  let started = false;
  let listening = false;
  let paused = false;
  let unlisten: (() => Promise<void>) | undefined;
  /** The one statement in flight: it records finished runs and claims new ones together. */
  let cycle: Promise<void> | undefined;
  const writes = new Set<Promise<unknown>>();
  let completions: Completion[] = [];

  const free = () => options.parallelism - runs.size - reserved;

  const track = <T>(promise: Promise<T>): Promise<T> => {
    writes.add(promise);
    void promise.finally(() => writes.delete(promise)).catch(() => {});
    return promise;
  };

  function hint(): void {
    moreMaybe = true;
    hintGeneration++;
  }

  /**
   * Sends the next statement unless one is in flight: finished runs are recorded and, when there
   * may be work and slots are free, min(batch, free slots) jobs are claimed in the same round trip.
   * What piles up meanwhile goes together in the next one, so a backlog drains at full speed.
   */
  function pump(): Promise<void> | undefined {
    if (!started || cycle || paused) return cycle;
    const n = !stopping && moreMaybe ? Math.min(options.batchSize, free()) : 0;
    if (n < 1 && completions.length === 0) return undefined;
    const finished = completions;
    completions = [];
    reserved += n;
    const generation = hintGeneration;
    const startedAt = performance.now();
    const current = (async () => {
      let claimed: ClaimedJob[] = [];
      let completed: number[];
      try {
        const complete = finished.map((c) => c.lease);
        if (n > 0) {
          ({ claimed, completed } = await completeAndClaimJobs(db, {
            workerId,
            kinds,
            limit: n,
            now: clock.now(),
            leaseMs,
            complete,
          }));
        } else completed = await completeJobs(db, { workerId, jobs: complete, now: clock.now() });
      } catch (error) {
        log.error("job loop statement failed; retrying in a second", { error });
        // keep the finished runs for the next try; their leases still protect them meanwhile
        completions = [...finished, ...completions];
        paused = true;
        setTimeout(() => {
          paused = false;
          pump();
        }, 1_000);
        return;
      } finally {
        reserved -= n;
      }
      if (n > 0)
        emit({
          type: "claimed",
          count: claimed.length,
          requested: n,
          durationMs: performance.now() - startedAt,
        });
      reportCompleted(finished, completed);
      for (const job of claimed) startRun(job);
      if (n > 0 && claimed.length < n && generation === hintGeneration) moreMaybe = false;
    })();
    cycle = current;
    void current.finally(() => {
      cycle = undefined;
      schedulePump();
    });
    return current;
  }

  let pumpScheduled = false;
  /** Pump once everything that finished in this turn of the event loop has freed its slot. */
  function schedulePump(): void {
    if (pumpScheduled) return;
    pumpScheduled = true;
    setImmediate(() => {
      pumpScheduled = false;
      pump();
    });
  }

  function reportCompleted(finished: Completion[], completed: number[]): void {
    if (finished.length === 0) return;
    const done = new Set(completed);
    const now = performance.now();
    for (const c of finished) {
      if (done.has(c.job.id))
        emit({
          type: "succeeded",
          id: c.job.id,
          kind: c.job.kind,
          attempt: c.job.attempts,
          durationMs: now - c.startedAt,
        });
      else lost(c.job);
    }
  }

  function startRun(job: ClaimedJob): void {
    const controller = new AbortController();
    const run: Run = { job, controller, released: false, done: Promise.resolve() };
    runs.set(job.id, run);
    run.done = execute(run).finally(() => {
      runs.delete(job.id);
      schedulePump();
    });
  }

  async function execute(run: Run): Promise<void> {
    const { job, controller } = run;
    const lease: JobLease = { id: job.id, attempts: job.attempts };
    const definition = options.registry.get(job.kind);
    if (!definition) {
      // claimed only for registered kinds, so this is a registry changed at run time
      recordFailure(run, new Error(`no handler for job kind "${job.kind}" in this process`), 0);
      return;
    }
    if (job.attempts > job.maxAttempts) {
      recordDead(
        run,
        `the lease of attempt ${job.maxAttempts} of ${job.maxAttempts} expired: the process running it stopped`,
      );
      return;
    }
    const parsed = definition.schema.safeParse(job.payload);
    if (!parsed.success) {
      const issues = describeIssues(parsed.error)
        .map((i) => `${i.path}: ${i.message}`)
        .join("; ");
      recordDead(run, `payload does not match the schema of job kind "${job.kind}": ${issues}`);
      return;
    }
    const remaining = job.lockedUntil.getTime() - clock.now().getTime();
    const timer = setTimeout(
      () => controller.abort(new Error("the job's lease is about to end")),
      Math.max(0, remaining - abortMargin(leaseMs)),
    );
    const startedAt = performance.now();
    try {
      await definition.handler(parsed.data, {
        id: job.id,
        kind: job.kind,
        attempt: job.attempts,
        maxAttempts: job.maxAttempts,
        signal: controller.signal,
      });
      // recorded by the next statement (pump runs as the slot frees)
      if (!run.released) completions.push({ lease, job, startedAt });
    } catch (error) {
      if (!run.released) recordFailure(run, error, performance.now() - startedAt);
    } finally {
      clearTimeout(timer);
    }
  }

  function lost(job: ClaimedJob): void {
    log.warn("job lease was taken over; result not recorded", { jobId: job.id, kind: job.kind });
    emit({ type: "lost", id: job.id, kind: job.kind, attempt: job.attempts });
  }

  function recordFailure(run: Run, error: unknown, durationMs: number): void {
    const { job } = run;
    if (job.attempts >= job.maxAttempts) {
      recordDead(run, describeJobError(error, deps.redactor));
      return;
    }
    const now = clock.now();
    const retryAt = new Date(now.getTime() + retryDelayMs(job.attempts, retry, random));
    const message = describeJobError(error, deps.redactor);
    track(
      failJob(db, {
        workerId,
        job: { id: job.id, attempts: job.attempts },
        now,
        error: message,
        retryAt,
      }).then(
        (ok) => {
          if (!ok) return lost(job);
          log.warn("job failed; will retry", {
            jobId: job.id,
            kind: job.kind,
            attempt: job.attempts,
            retryAt,
          });
          emit({ type: "failed", id: job.id, kind: job.kind, attempt: job.attempts, retryAt, durationMs });
        },
        (e: unknown) => log.error("recording a failed job failed", { jobId: job.id, error: e }),
      ),
    );
  }

  function recordDead(run: Run, reason: string): void {
    const { job } = run;
    const message = deps.redactor.text(reason);
    track(
      failJob(db, {
        workerId,
        job: { id: job.id, attempts: job.attempts },
        now: clock.now(),
        error: message,
        retryAt: null,
      }).then(
        (ok) => {
          if (!ok) return lost(job);
          log.error("job is dead", { jobId: job.id, kind: job.kind, attempt: job.attempts, reason: message });
          emit({ type: "dead", id: job.id, kind: job.kind, attempt: job.attempts, reason: message });
        },
        (e: unknown) => log.error("recording a dead job failed", { jobId: job.id, error: e }),
      ),
    );
  }

  const poller: IntervalRunner = createIntervalRunner({
    name: "jobs",
    intervalMs: options.pollMs,
    logger: log,
    random,
    tick: async () => {
      hint();
      await pump();
      return false;
    },
  });

  const retention = options.retention;
  const pruner = retention
    ? createIntervalRunner({
        name: "jobs-prune",
        intervalMs: retention.intervalMs ?? 10 * 60_000,
        logger: log,
        random,
        tick: async () => {
          const now = clock.now().getTime();
          const count = await pruneJobs(db, {
            succeededBefore: new Date(now - retention.succeededMs),
            deadBefore: new Date(now - retention.deadMs),
          });
          if (count > 0) {
            log.info("pruned finished jobs", { count });
            emit({ type: "pruned", count });
          }
          // jobs of kinds no process handles stay forever: say so (after a release dropped a kind)
          const orphaned = await orphanedJobKinds(db, { kinds, before: new Date(now - leaseMs) });
          if (orphaned.length > 0)
            log.warn("unfinished jobs of kinds no process has handled for a lease or longer", {
              kinds: orphaned,
              hint: "a release dropped these kinds, or the process that handles them is down (docs/runbooks/switch-over.md)",
            });
        },
      })
    : undefined;

  return {
    workerId,
    get listening() {
      return listening;
    },
    async start() {
      if (started) return;
      started = true;
      if (options.listen !== false) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        try {
          unlisten = await Promise.race([
            database.listen(JOBS_CHANNEL, () => {
              hint();
              pump();
            }),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error("LISTEN timed out")), 5_000);
            }),
          ]);
          listening = true;
        } catch (error) {
          log.warn("LISTEN on the jobs channel failed; polling only", { error });
        } finally {
          clearTimeout(timer);
        }
      }
      poller.start();
      pruner?.start();
      log.info("job loop started", { kinds, parallelism: options.parallelism, batchSize: options.batchSize });
    },
    wake() {
      hint();
      pump();
    },
    running: () => runs.size,
    async stop(timeoutMs) {
      if (!started || stopping) return { finished: 0, released: [] };
      stopping = true;
      await Promise.all([poller.stop(), pruner?.stop()]);
      await cycle;
      const inFlight = [...runs.values()];
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled(inFlight.map((r) => r.done)),
        new Promise((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      const left = [...runs.values()];
      let released: number[] = [];
      if (left.length > 0) {
        for (const run of left) {
          run.released = true;
          run.controller.abort(new Error("the process is shutting down"));
        }
        try {
          released = await releaseJobs(db, {
            workerId,
            jobs: left.map((r) => ({ id: r.job.id, attempts: r.job.attempts })),
            now: clock.now(),
          });
          log.info("released unfinished jobs", { ids: released });
          emit({ type: "released", ids: released });
        } catch (error) {
          log.error("releasing jobs failed; they run again once their lease expires", { error });
        }
      }
      // record what finished: completions go out in the statements pump still sends
      for (let i = 0; i < 100 && (cycle || completions.length > 0 || writes.size > 0); i++) {
        pump();
        await Promise.allSettled([cycle, ...writes]);
        if (paused) break; // the database is away: those runs go again after their lease
      }
      if (unlisten) await unlisten().catch(() => {});
      listening = false;
      started = false; // a pending retry timer finds the loop stopped
      log.info("job loop stopped", { finished: inFlight.length - left.length, released: released.length });
      return { finished: inFlight.length - left.length, released };
    },
  };
}
