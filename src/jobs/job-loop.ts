/**
 * The job loop: claims due jobs of the kinds this process handles and runs each with `runJob`
 * (src/jobs/run-job.ts). One statement is in flight at a time; it records the runs that finished
 * since the last one and claims min(batch, free slots) new ones in the same round trip.
 *
 * Modes (`JobLoop.mode`) and the moves between them:
 *
 *   idle ──start()──▶ starting ──LISTEN set up (or given up)──▶ claiming
 *   claiming ──a claim came back short, no wake-up meanwhile──▶ waiting
 *   waiting ──NOTIFY, poll tick or wake()──▶ claiming
 *   claiming | waiting ──a statement failed──▶ backoff ──one second──▶ claiming
 *   starting | claiming | waiting | backoff ──stop()──▶ stopping ──drained──▶ stopped
 *
 * - idle: built, not started; nothing is sent.
 * - starting: LISTEN on the jobs channel is being set up (5 s at most); nothing is sent yet.
 * - claiming: there may be due jobs: each statement claims as many as there are free slots (and
 *   room in the local queue, below), and another goes as soon as a slot frees, so a backlog drains
 *   at full speed.
 * - waiting: the last claim found fewer jobs than asked; statements only record finished runs
 *   until something says there may be work again.
 * - backoff: the database failed a statement; finished runs wait (their leases protect them) and
 *   nothing is sent for a second.
 * - stopping: no claims; running jobs get the stop's timeout to finish, the rest are aborted and
 *   released (attempt not counted, due at once), and what finished is recorded.
 * - stopped: done; start() does nothing.
 *
 * Beside the modes, while jobs run: a heartbeat every third of the lease renews the lease of every
 * running job in one statement (a run it cannot renew was cancelled or taken over: its signal
 * fires), a timer per run fires the signal `abortMargin` before its current lease ends (when the
 * heartbeats stopped getting through), and a NOTIFY on `plinth_job_cancel` fires the signal of a
 * run an admin cancelled.
 *
 * The local queue (`localQueue` > 0, `BackgroundProcessing:JobLocalQueueSize`; off by default):
 * claims may take more jobs than there are free slots; the extra ones wait here, claimed under the
 * same lease and renewed by the same heartbeat, and start as slots free without a round trip. It
 * holds at most about LOCAL_QUEUE_HORIZON_MS of work at the recent mean run time (never more than
 * `localQueue` jobs), so a job that arrives later — a higher priority, another tenant — waits at
 * most about that long behind it; jobs that take longer than the horizon get no queue at all. A
 * queued job an admin cancels or whose lease was lost is dropped, never started; one whose lease is
 * too short to run is dropped too; at shutdown the queue is released (attempt not counted) first.
 */
import type { Clock } from "../clock.ts";
import type { Database } from "../db/client.ts";
import { createOutageLog, type OutageLog } from "../db/outage-log.ts";
import type { Redactor } from "../redact.ts";
import { settledWithin } from "../runtime/with-timeout.ts";
import { workerId as newWorkerId } from "../runtime/worker-id.ts";
import type { Logger } from "../telemetry/logger.ts";
import { JOB_CANCEL_CHANNEL, JOBS_CHANNEL } from "./enqueue.ts";
import { createIntervalRunner, type IntervalRunner } from "./interval-runner.ts";
import { createJobPruner } from "./job-pruner.ts";
import {
  type ClaimedJob,
  completeAndClaimJobs,
  completeJobs,
  type JobLease,
  LEASE_MS,
  type RetryPolicy,
  renewLeases,
} from "./queue.ts";
import { JobCancelledError, type JobRegistry } from "./registry.ts";
import { abortMargin, type RunEvent, type RunJobDeps, reportCompletions, runJob } from "./run-job.ts";
import { releaseUnfinishedJobs } from "./upkeep.ts";

/** What the job loop reports, for metrics (src/jobs/telemetry.ts `jobMetrics`). */
export type JobEvent =
  | { type: "claimed"; count: number; requested: number; durationMs: number }
  | RunEvent
  | { type: "released"; ids: number[] }
  | { type: "pruned"; count: number };

export type JobLoopMode = "idle" | "starting" | "claiming" | "waiting" | "backoff" | "stopping" | "stopped";

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
  /**
   * `BackgroundProcessing:JobLocalQueueSize`: jobs claimed ahead of free slots, at most (and at most
   * LOCAL_QUEUE_HORIZON_MS of work). 0 (the default): a claimed job is a running job.
   */
  localQueue?: number;
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
  /** How often running jobs' leases are renewed; default a third of the lease; 0 switches heartbeats off. */
  heartbeatMs?: number;
  onEvent?: (event: JobEvent) => void;
  random?: () => number;
}

interface Completion {
  lease: JobLease;
  job: ClaimedJob;
  startedAt: number;
}

interface Run {
  job: ClaimedJob;
  controller: AbortController;
  /** Resolves when the handler is done (its result may still be being written). */
  done: Promise<void>;
  released: boolean;
  /** The lease as last written (claim or heartbeat). */
  lockedUntil: Date;
  leaseTimer: ReturnType<typeof setTimeout> | undefined;
  /** Cancelled, taken over or settled: no more heartbeats for it. */
  ended: boolean;
}

const LISTEN_TIMEOUT_MS = 5_000;
/** The local queue holds about this much work at the recent mean run time. */
export const LOCAL_QUEUE_HORIZON_MS = 50;
/** Weight of the newest run time in the mean that sizes the local queue. */
const MEAN_WEIGHT = 0.05;
const BACKOFF_MS = 1_000;

export function createJobLoop(deps: JobLoopDeps, options: JobLoopOptions): JobLoop {
  return new JobLoop(deps, options);
}

export class JobLoop {
  readonly workerId: string;
  #mode: JobLoopMode = "idle";
  readonly #deps: JobLoopDeps;
  readonly #options: JobLoopOptions;
  readonly #kinds: string[];
  readonly #groupLimits: Record<string, number>;
  /** Where the next claim's round robin over groups resumes. */
  #groupCursor = "";
  readonly #leaseMs: number;
  readonly #log: Logger;
  readonly #run: RunJobDeps;
  readonly #poller: IntervalRunner;
  readonly #pruner: IntervalRunner | undefined;
  readonly #runs = new Map<number, Run>();
  /** Claimed ahead, not started (local queue), in claim order. */
  #queue: ClaimedJob[] = [];
  /** Mean handler time (ms), exponentially weighted; undefined until a run finished. */
  #meanRunMs: number | undefined;
  /** Slots promised to the statement in flight. */
  #reserved = 0;
  /** Counts wake-ups, so a claim that was short but overtaken by one does not switch to waiting. */
  #wakeUps = 0;
  /** The one claiming statement in flight; resolves false when the database failed it. */
  #cycle: Promise<boolean> | undefined;
  /**
   * Successes recorded by a statement of their own, beside the claim (one at a time; false when the
   * database failed it): always with a local queue, and without one when there is no claim for them
   * to ride on (waiting, or no free slot). Otherwise they ride on the next claim.
   */
  #completing: Promise<boolean> | undefined;
  /** Results of runs being written outside the statement (failures, dead jobs). */
  readonly #writes = new Set<Promise<unknown>>();
  #completions: Completion[] = [];
  #unlisten: (() => Promise<void>) | undefined;
  #pumpScheduled: ReturnType<typeof setImmediate> | undefined;
  #backoffTimer: ReturnType<typeof setTimeout> | undefined;
  #heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  #renewing: Promise<void> | undefined;
  readonly #outage: OutageLog;

  constructor(deps: JobLoopDeps, options: JobLoopOptions) {
    this.#deps = deps;
    this.#options = options;
    this.workerId = options.workerId ?? newWorkerId();
    this.#kinds = options.registry.kinds();
    this.#groupLimits = options.registry.groupLimits();
    this.#leaseMs = options.leaseMs ?? LEASE_MS;
    this.#log = deps.logger.child({ loop: "jobs", workerId: this.workerId });
    const now = () => deps.clock.now().getTime(); // database down: one line, one a minute, recovery
    this.#outage = createOutageLog({ logger: this.#log, what: "job loop statement", now });
    this.#run = {
      db: deps.database.db,
      clock: deps.clock,
      logger: this.#log,
      redactor: deps.redactor,
      emit: (event) => this.#emit(event),
    };
    const random = options.random ?? Math.random;
    this.#poller = createIntervalRunner({
      name: "jobs",
      intervalMs: options.pollMs,
      logger: this.#log,
      random,
      tick: async () => {
        this.#wake();
        await this.#pump();
        return false;
      },
    });
    this.#pruner = options.retention
      ? createJobPruner(this.#run, {
          ...options.retention,
          kinds: this.#kinds,
          leaseMs: this.#leaseMs,
          random,
          onPruned: (count) => this.#emit({ type: "pruned", count }),
        })
      : undefined;
  }

  get mode(): JobLoopMode {
    return this.#mode;
  }

  /** Whether NOTIFY wakes this loop (LISTEN succeeded). */
  get listening(): boolean {
    return this.#unlisten !== undefined;
  }

  /** Jobs whose handler is running now. */
  running(): number {
    return this.#runs.size;
  }

  /** Jobs claimed ahead in the local queue, not started yet. */
  queued(): number {
    return this.#queue.length;
  }

  /**
   * How many jobs the local queue may hold now: LOCAL_QUEUE_HORIZON_MS of work at the mean run
   * time over `parallelism` slots, at most `localQueue`; before any run finished, the batch size.
   */
  #queueTarget(): number {
    const size = this.#options.localQueue ?? 0;
    if (size <= 0) return 0;
    if (this.#meanRunMs === undefined) return Math.min(size, this.#options.batchSize);
    const fits = (LOCAL_QUEUE_HORIZON_MS / Math.max(this.#meanRunMs, 0.001)) * this.#options.parallelism;
    return Math.min(size, Math.floor(fits));
  }

  async start(): Promise<void> {
    if (this.#mode !== "idle") return;
    this.#mode = "starting";
    if (this.#options.listen !== false) await this.#listen();
    if (this.#mode !== "starting") return this.#unlistenNow(); // stopped while LISTEN was set up
    this.#mode = "claiming";
    const heartbeatMs = this.#options.heartbeatMs ?? Math.floor(this.#leaseMs / 3);
    if (heartbeatMs > 0) this.#heartbeatTimer = setInterval(() => void this.#heartbeat(), heartbeatMs);
    this.#poller.start();
    this.#pruner?.start();
    this.#log.info("job loop started", {
      kinds: this.#kinds,
      parallelism: this.#options.parallelism,
      batchSize: this.#options.batchSize,
    });
  }

  /** Claim now instead of at the next poll. */
  wake(): void {
    this.#wake();
    this.#pump();
  }

  /**
   * Stops claiming, lets running jobs finish for up to `timeoutMs`, then aborts and releases the
   * rest (attempt not counted, due at once) so another process takes them immediately.
   */
  async stop(timeoutMs: number): Promise<{ finished: number; released: number[] }> {
    if (this.#mode === "idle" || this.#mode === "stopping" || this.#mode === "stopped")
      return { finished: 0, released: [] };
    this.#mode = "stopping";
    clearTimeout(this.#backoffTimer);
    await Promise.all([this.#poller.stop(), this.#pruner?.stop()]);
    await this.#cycle;
    // claimed ahead, never started: given back at once, so another process takes them now
    const queued = this.#queue.splice(0);
    const releasedQueue = queued.length > 0 ? await this.#releaseQueued(queued) : [];
    const inFlight = [...this.#runs.values()];
    await settledWithin(
      inFlight.map((r) => r.done),
      timeoutMs,
    );
    const left = [...this.#runs.values()];
    const released = [...releasedQueue, ...(left.length > 0 ? await this.#release(left) : [])];
    // record what finished: completions go out in the statements #pump still sends
    const busy = () =>
      this.#cycle || this.#completing || this.#completions.length > 0 || this.#writes.size > 0;
    for (let i = 0; i < 100 && busy(); i++) {
      const cycle = this.#pump();
      const completing = this.#completing;
      await Promise.allSettled([cycle, completing, ...this.#writes]);
      // the database is away: those runs go again after their lease
      if ((cycle && !(await cycle)) || (completing && !(await completing))) break;
    }
    await this.#unlistenNow();
    clearImmediate(this.#pumpScheduled);
    clearInterval(this.#heartbeatTimer);
    await this.#renewing;
    for (const run of this.#runs.values()) clearTimeout(run.leaseTimer);
    this.#mode = "stopped";
    const finished = inFlight.length - left.length;
    this.#log.info("job loop stopped", { finished, released: released.length });
    return { finished, released };
  }

  async #listen(): Promise<void> {
    if (!this.#deps.database.sessions) {
      this.#log.info("job loop polls: LISTEN needs DATABASE_DIRECT_URL beside a transaction pooler", {
        pollMs: this.#options.pollMs,
      });
      return;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const database = this.#deps.database;
      const both = Promise.allSettled([
        database.listen(JOBS_CHANNEL, () => this.wake()),
        database.listen(JOB_CANCEL_CHANNEL, (payload) => this.#cancelled(payload)),
      ]);
      const results = await Promise.race([
        both,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("LISTEN timed out")), LISTEN_TIMEOUT_MS);
        }),
      ]);
      const unlistens = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
      const unlistenAll = async () => {
        await Promise.allSettled(unlistens.map((unlisten) => unlisten()));
      };
      const failed = results.find((r) => r.status === "rejected");
      if (failed) {
        await unlistenAll(); // both or neither: cancels then arrive by heartbeat, wake-ups by polling
        throw failed.reason;
      }
      this.#unlisten = unlistenAll;
    } catch (error) {
      this.#log.warn("LISTEN on the jobs channels failed; polling only (cancels by heartbeat)", { error });
    } finally {
      clearTimeout(timer);
    }
  }

  async #unlistenNow(): Promise<void> {
    await this.#unlisten?.().catch(() => {});
    this.#unlisten = undefined;
  }

  /** A NOTIFY on the cancel channel (`<id>:<attempts>`): the run, if it is here, is signalled. */
  #cancelled(payload: string): void {
    const [id, attempts] = payload.split(":").map(Number);
    const at = this.#queue.findIndex((j) => j.id === id && j.attempts === attempts);
    if (at >= 0) {
      const [job] = this.#queue.splice(at, 1);
      if (job) this.#dropQueued(job, "cancelled");
      return;
    }
    const run = id === undefined ? undefined : this.#runs.get(id);
    if (!run || run.job.attempts !== attempts || id === undefined) return;
    this.#endRun(run, new JobCancelledError(id));
  }

  #endRun(run: Run, reason: Error): void {
    run.ended = true;
    clearTimeout(run.leaseTimer);
    run.controller.abort(reason);
  }

  /** Fires the run's signal `abortMargin` before its current lease ends (re-armed by each heartbeat). */
  #armLeaseTimer(run: Run): void {
    clearTimeout(run.leaseTimer);
    const remaining = run.lockedUntil.getTime() - this.#deps.clock.now().getTime();
    run.leaseTimer = setTimeout(
      () => run.controller.abort(new Error("the job's lease is about to end")),
      Math.max(0, remaining - abortMargin(this.#leaseMs)),
    );
  }

  /** Renews the lease of every running job in one statement; one heartbeat at a time. */
  #heartbeat(): Promise<void> | undefined {
    if (this.#renewing) return this.#renewing;
    const runs = [...this.#runs.values()].filter((r) => !r.ended);
    const queued = [...this.#queue];
    if (runs.length === 0 && queued.length === 0) return undefined;
    this.#renewing = (async () => {
      try {
        const renewed = await renewLeases(this.#deps.database.db, {
          workerId: this.workerId,
          jobs: [...runs.map((r) => r.job), ...queued].map((j) => ({ id: j.id, attempts: j.attempts })),
          now: this.#deps.clock.now(),
          leaseMs: this.#leaseMs,
        });
        const queuedNow = new Map(this.#queue.map((j) => [j.id, j]));
        for (const lease of renewed) {
          const waiting = queuedNow.get(lease.id);
          if (waiting) {
            if (lease.renewed && lease.lockedUntil) waiting.lockedUntil = lease.lockedUntil;
            else {
              this.#queue = this.#queue.filter((j) => j !== waiting);
              this.#dropQueued(waiting, lease.status === "cancelled" ? "cancelled" : "lost");
            }
            continue;
          }
          const run = this.#runs.get(lease.id);
          if (!run || run.ended) continue;
          if (lease.renewed && lease.lockedUntil) {
            run.lockedUntil = lease.lockedUntil;
            this.#armLeaseTimer(run);
          } else if (lease.status === "cancelled") {
            this.#endRun(run, new JobCancelledError(lease.id));
          } else if (lease.status === "processing" || lease.status === null) {
            this.#endRun(run, new Error("the job's lease was taken over by another worker"));
          } else {
            run.ended = true; // its result is written already (a timeout recorded as failed)
          }
        }
      } catch (error) {
        // the lease timers still stop the handlers before their leases end
        this.#log.warn("renewing the leases of running jobs failed", {
          error,
          jobs: runs.length,
          queued: queued.length,
        });
      } finally {
        this.#renewing = undefined;
      }
    })();
    return this.#renewing;
  }

  #emit(event: JobEvent): void {
    try {
      this.#options.onEvent?.(event);
    } catch (error) {
      this.#deps.logger.warn("job event hook failed", { error });
    }
  }

  /** There may be work: a NOTIFY, a poll tick or `wake()`. */
  #wake(): void {
    this.#wakeUps++;
    if (this.#mode === "waiting") this.#mode = "claiming";
  }

  /**
   * Sends the next statement unless one is in flight: finished runs are recorded and, in claiming
   * mode with slots free, min(batch, free slots) jobs are claimed in the same round trip. What
   * piles up meanwhile goes together in the next one. With a local queue (hundreds of jobs a
   * statement) the successes go in a statement of their own, in flight beside the claim: the two
   * cost about the same, and in parallel a backlog drains at the pace of the slower one.
   */
  #pump(): Promise<boolean> | undefined {
    const mode = this.#mode;
    if (mode === "idle" || mode === "starting" || mode === "backoff" || mode === "stopped")
      return this.#cycle;
    const split = (this.#options.localQueue ?? 0) > 0;
    const target = this.#queueTarget();
    const room = this.#options.parallelism + target - this.#runs.size - this.#queue.length - this.#reserved;
    const n = mode === "claiming" ? Math.min(Math.max(this.#options.batchSize, target), room) : 0;
    // successes with no claim to ride on (waiting, or no free slot) go alone, beside the claim slot,
    // so a NOTIFY that arrives meanwhile is claimed at once instead of after them
    const alone = split || n < 1;
    if (alone && !this.#completing && this.#completions.length > 0) {
      const completing = this.#recordCompletions(this.#completions);
      this.#completions = [];
      this.#completing = completing;
      void completing.finally(() => {
        this.#completing = undefined;
        this.#schedulePump();
      });
    }
    if (this.#cycle) return this.#cycle;
    const carried = alone ? 0 : this.#completions.length;
    if (n < 1 && carried === 0) return undefined;
    const finished = alone ? [] : this.#completions;
    if (!alone) this.#completions = [];
    this.#reserved += n;
    const cycle = this.#statement(finished, n);
    this.#cycle = cycle;
    void cycle.finally(() => {
      this.#cycle = undefined;
      this.#schedulePump();
    });
    return cycle;
  }

  async #statement(finished: Completion[], n: number): Promise<boolean> {
    const wakeUps = this.#wakeUps;
    const startedAt = performance.now();
    let claimed: ClaimedJob[];
    let completed: number[];
    let more = false;
    try {
      // with n = 0 this only records the finished runs
      let cursor: string;
      ({ claimed, completed, cursor, more } = await completeAndClaimJobs(this.#deps.database.db, {
        workerId: this.workerId,
        kinds: this.#kinds,
        limit: n,
        now: this.#deps.clock.now(),
        leaseMs: this.#leaseMs,
        complete: finished.map((c) => c.lease),
        groupLimits: this.#groupLimits,
        groupCursor: this.#groupCursor,
      }));
      this.#groupCursor = cursor;
      this.#outage.succeeded();
    } catch (error) {
      this.#outage.failed(error); // retried in a second
      // keep the finished runs for the next try; their leases still protect them meanwhile
      this.#completions = [...finished, ...this.#completions];
      if (this.#mode === "claiming" || this.#mode === "waiting") this.#backoff();
      return false;
    } finally {
      this.#reserved -= n;
    }
    if (n > 0)
      this.#emit({
        type: "claimed",
        count: claimed.length,
        requested: n,
        durationMs: performance.now() - startedAt,
      });
    reportCompletions(this.#run, finished, completed);
    this.#queue.push(...claimed);
    this.#fill();
    // short because lower priorities or full groups wait: claim again, as long as claims bring jobs
    const drained = claimed.length === 0 || !more;
    if (n > 0 && claimed.length < n && drained && wakeUps === this.#wakeUps && this.#mode === "claiming")
      this.#mode = "waiting";
    return true;
  }

  /** Records successes alone (local queue); on failure they wait for the next try, as in #statement. */
  async #recordCompletions(finished: Completion[]): Promise<boolean> {
    try {
      const completed = await completeJobs(this.#deps.database.db, {
        workerId: this.workerId,
        jobs: finished.map((c) => c.lease),
        now: this.#deps.clock.now(),
      });
      this.#outage.succeeded();
      reportCompletions(this.#run, finished, completed);
      return true;
    } catch (error) {
      this.#outage.failed(error);
      this.#completions = [...finished, ...this.#completions];
      if (this.#mode === "claiming" || this.#mode === "waiting") this.#backoff();
      return false;
    }
  }

  #backoff(): void {
    this.#mode = "backoff";
    this.#backoffTimer = setTimeout(() => {
      if (this.#mode !== "backoff") return;
      this.#mode = "claiming";
      this.#pump();
    }, BACKOFF_MS);
  }

  /** Pump once everything that finished in this turn of the event loop has freed its slot. */
  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = setImmediate(() => {
      this.#pumpScheduled = undefined;
      this.#pump();
    });
  }

  /** Starts queued jobs while slots are free (not while stopping: the queue is released then). */
  #fill(): void {
    if (this.#mode === "stopping" || this.#mode === "stopped") return;
    while (this.#runs.size < this.#options.parallelism) {
      const job = this.#queue.shift();
      if (!job) return;
      // a lease too short to run in (the heartbeat could not renew it): leave it to its lease
      if (job.lockedUntil.getTime() - this.#deps.clock.now().getTime() <= abortMargin(this.#leaseMs)) {
        this.#dropQueued(job, "expiring");
        continue;
      }
      this.#startRun(job);
    }
  }

  /** A queued job that will not start here: cancelled by an admin, its lease lost or about to end. */
  #dropQueued(job: ClaimedJob, why: "cancelled" | "lost" | "expiring"): void {
    const fields = { jobId: job.id, kind: job.kind, attempt: job.attempts };
    if (why === "cancelled") {
      this.#log.info("queued job cancelled before it started", fields);
      this.#emit({ type: "cancelled", id: job.id, kind: job.kind, attempt: job.attempts });
    } else if (why === "lost") {
      this.#log.warn("queued job's lease was taken over before it started", fields);
      this.#emit({ type: "lost", id: job.id, kind: job.kind, attempt: job.attempts });
    } else this.#log.warn("queued job's lease is about to end; left to run again after it", fields);
    this.#schedulePump();
  }

  #startRun(job: ClaimedJob): void {
    let handled!: () => void;
    const run: Run = {
      job,
      controller: new AbortController(),
      released: false,
      done: new Promise<void>((resolve) => {
        handled = resolve;
      }),
      lockedUntil: job.lockedUntil,
      leaseTimer: undefined,
      ended: false,
    };
    this.#runs.set(job.id, run);
    this.#armLeaseTimer(run);
    const startedAt = performance.now();
    const result = runJob(this.#run, {
      job,
      workerId: this.workerId,
      registry: this.#options.registry,
      leaseMs: this.#leaseMs,
      retry: this.#options.retry,
      random: this.#options.random,
      controller: run.controller,
      leaseTimer: false, // the heartbeat keeps the lease; #armLeaseTimer stops the handler before it ends
      released: () => run.released,
      // recorded by the next statement (#pump runs as the slot frees)
      complete: (lease, startedAt) => this.#completions.push({ lease, job, startedAt }),
      // the handler is done (always after an await, so `result` is set): free the slot, and let
      // stop() wait for the result's write but never for a released run's handler
      onHandled: () => {
        run.ended = true;
        clearTimeout(run.leaseTimer);
        this.#runs.delete(job.id);
        const ms = performance.now() - startedAt;
        this.#meanRunMs =
          this.#meanRunMs === undefined ? ms : this.#meanRunMs + MEAN_WEIGHT * (ms - this.#meanRunMs);
        this.#fill();
        this.#writes.add(result);
        void result.finally(() => this.#writes.delete(result));
        handled();
        this.#schedulePump();
      },
    });
  }

  async #releaseQueued(queued: ClaimedJob[]): Promise<number[]> {
    const jobs = queued.map((j) => ({ id: j.id, attempts: j.attempts }));
    const released = await releaseUnfinishedJobs(this.#run, { workerId: this.workerId, jobs });
    if (released) this.#emit({ type: "released", ids: released });
    return released ?? [];
  }

  async #release(left: Run[]): Promise<number[]> {
    for (const run of left) {
      run.released = true;
      run.controller.abort(new Error("the process is shutting down"));
    }
    const jobs = left.map((r) => ({ id: r.job.id, attempts: r.job.attempts }));
    const released = await releaseUnfinishedJobs(this.#run, { workerId: this.workerId, jobs });
    if (released) this.#emit({ type: "released", ids: released });
    return released ?? [];
  }
}
