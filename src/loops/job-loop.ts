import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Clock } from "../clock.ts";
import type { Redactor } from "../config/redact.ts";
import type { Database } from "../db/client.ts";
import { describeIssues, JOBS_CHANNEL } from "../jobs/enqueue.ts";
import {
  type ClaimedJob,
  claimJobs,
  completeJobs,
  DEFAULT_RETRY_POLICY,
  describeJobError,
  failJob,
  type JobLease,
  LEASE_MS,
  pruneJobs,
  type RetryPolicy,
  releaseJobs,
  retryDelayMs,
} from "../jobs/queue.ts";
import type { JobRegistry } from "../jobs/registry.ts";
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
  /** Slots promised to claims still in flight. */
  let reserved = 0;
  /** A claim came back full, or a NOTIFY or poll said there may be work: claim when a slot frees. */
  let moreMaybe = true;
  let hintGeneration = 0;
  let stopping = false;
  let started = false;
  let listening = false;
  let unlisten: (() => Promise<void>) | undefined;
  const claims = new Set<Promise<void>>();
  const writes = new Set<Promise<unknown>>();
  let completions: { lease: JobLease; job: ClaimedJob; startedAt: number }[] = [];
  let flushing: Promise<void> | undefined;

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

  /** Starts one claim for the free slots if there may be work; returns it so a poll tick can await it. */
  function pump(): Promise<void> | undefined {
    if (stopping || !started || !moreMaybe) return undefined;
    const n = Math.min(options.batchSize, free());
    if (n < 1) return undefined;
    reserved += n;
    const generation = hintGeneration;
    const startedAt = performance.now();
    const claim = (async () => {
      let claimed: ClaimedJob[] = [];
      try {
        claimed = await claimJobs(db, { workerId, kinds, limit: n, now: clock.now(), leaseMs });
      } catch (error) {
        log.error("claiming jobs failed", { error });
        return; // the next poll tries again
      } finally {
        reserved -= n;
      }
      emit({
        type: "claimed",
        count: claimed.length,
        requested: n,
        durationMs: performance.now() - startedAt,
      });
      for (const job of claimed) startRun(job);
      if (claimed.length < n && generation === hintGeneration) moreMaybe = false;
      // a full claim means a backlog: claim again at once while slots are free
      pump();
    })();
    claims.add(claim);
    void claim.finally(() => claims.delete(claim));
    return claim;
  }

  function slotFreed(): void {
    pump();
  }

  function startRun(job: ClaimedJob): void {
    const controller = new AbortController();
    const run: Run = { job, controller, released: false, done: Promise.resolve() };
    runs.set(job.id, run);
    run.done = execute(run).finally(() => {
      runs.delete(job.id);
      slotFreed();
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
      if (!run.released) queueCompletion(lease, job, startedAt);
    } catch (error) {
      if (!run.released) recordFailure(run, error, performance.now() - startedAt);
    } finally {
      clearTimeout(timer);
    }
  }

  function queueCompletion(lease: JobLease, job: ClaimedJob, startedAt: number): void {
    completions.push({ lease, job, startedAt });
    // group commit: completions that arrive while one flush runs go together in the next
    flushing ??= track(flush());
  }

  async function flush(): Promise<void> {
    try {
      while (completions.length > 0) {
        const batch = completions;
        completions = [];
        try {
          const done = new Set(
            await completeJobs(db, { workerId, jobs: batch.map((c) => c.lease), now: clock.now() }),
          );
          const finishedAt = performance.now();
          for (const c of batch) {
            if (done.has(c.job.id))
              emit({
                type: "succeeded",
                id: c.job.id,
                kind: c.job.kind,
                attempt: c.job.attempts,
                durationMs: finishedAt - c.startedAt,
              });
            else lost(c.job);
          }
        } catch (error) {
          // at-least-once: these rows stay processing and run again once their lease expires
          log.error("recording finished jobs failed", { error, ids: batch.map((c) => c.job.id) });
        }
      }
    } finally {
      flushing = undefined;
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
        try {
          unlisten = await Promise.race([
            database.listen(JOBS_CHANNEL, () => {
              hint();
              pump();
            }),
            new Promise<never>((_, reject) => setTimeout(() => reject(new Error("LISTEN timed out")), 5_000)),
          ]);
          listening = true;
        } catch (error) {
          log.warn("LISTEN on the jobs channel failed; polling only", { error });
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
      await Promise.allSettled([...claims]);
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
      while (flushing || writes.size > 0) await Promise.allSettled([flushing, ...writes]);
      if (unlisten) await unlisten().catch(() => {});
      listening = false;
      log.info("job loop stopped", { finished: inFlight.length - left.length, released: released.length });
      return { finished: inFlight.length - left.length, released };
    },
  };
}
