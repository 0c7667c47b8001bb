/**
 * The job loop: claims due jobs of the kinds this process handles and runs them (src/jobs/job-runs.ts,
 * src/jobs/run-job.ts); their outcomes go to the completer (src/jobs/completer.ts), which writes
 * them. One claiming statement is in flight at a time; it carries the outcomes waiting to be
 * written and claims as many jobs as the places they and the free ones make, in one round trip.
 *
 * Modes and the moves between them: src/jobs/job-loop-modes.ts (`#move` refuses any other).
 *
 * A job holds its place from its claim until its outcome is recorded or it is released (with a
 * local queue, up to twice its size of outcomes on their way do not count): a loop whose writes
 * fail holds its jobs (their leases renewed by the heartbeat) and claims again as the database
 * answers, never more than its places. A claim whose answer was lost may have committed:
 * before the next claim the loop reads what it holds and runs the jobs it did not know of.
 *
 * The local queue (`localQueue`, src/jobs/local-queue.ts) holds jobs claimed ahead of free slots; with
 * it the completer writes outcomes in statements of their own, beside the claims.
 */
import { describeDatabaseFailure, isConnectionFailure } from "../db/database-failure.ts";
import { createOutageLog, type OutageLog } from "../db/outage-log.ts";
import { settledWithin, withTimeout } from "../runtime/with-timeout.ts";
import { workerId as newWorkerId } from "../runtime/worker-id.ts";
import type { Logger } from "../telemetry/logger.ts";
import { type ClaimResult, completeAndClaimJobs, heldJobs } from "./claim.ts";
import { type Carried, type Completer, createCompleter } from "./completer.ts";
import { createIntervalRunner, type IntervalRunner } from "./interval-runner.ts";
import { listenForJobs } from "./job-listen.ts";
import { assertMove } from "./job-loop-modes.ts";
import type { JobEvent, JobLoopDeps, JobLoopMode, JobLoopOptions } from "./job-loop-options.ts";
import { createJobPruner } from "./job-pruner.ts";
import { JobRuns } from "./job-runs.ts";
import { LocalQueue } from "./local-queue.ts";
import { LEASE_MS, STATEMENT_TIMEOUT_MS } from "./queue.ts";
import type { RateCap } from "./registry.ts";

export type { JobEvent, JobLoopDeps, JobLoopMode, JobLoopOptions } from "./job-loop-options.ts";
export { LOCAL_QUEUE_HORIZON_MS } from "./local-queue.ts";

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
  readonly #rateLimits: RateCap[];
  readonly #leaseMs: number;
  readonly #log: Logger;
  readonly #outage: OutageLog;
  readonly #queue: LocalQueue;
  readonly #completer: Completer;
  readonly #runs: JobRuns;
  readonly #poller: IntervalRunner;
  readonly #pruner: IntervalRunner | undefined;
  /** Where the next claim's round robin over groups resumes. */
  #groupCursor = "";
  /** Places promised to the statement in flight beyond those its outcomes free. */
  #reserved = 0;
  /** Counts wake-ups, so a claim that was short but overtaken by one does not switch to waiting. */
  #wakeUps = 0;
  /** The one claiming statement in flight; resolves false when the database failed it. */
  #cycle: Promise<boolean> | undefined;
  /** A claim failed without an answer: it may have committed, so the next statement looks first. */
  #claimUncertain = false;
  #unlisten: (() => Promise<void>) | undefined;
  #pumpScheduled: ReturnType<typeof setImmediate> | undefined;
  #backoffTimer: ReturnType<typeof setTimeout> | undefined;
  #heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  /** Wakes the loop when the next rate-limited job is due (sooner than the poll). */
  #dueTimer: { at: number; timer: ReturnType<typeof setTimeout> } | undefined;

  constructor(deps: JobLoopDeps, options: JobLoopOptions) {
    this.#deps = deps;
    this.#options = options;
    this.workerId = options.workerId ?? newWorkerId();
    this.#kinds = options.registry.kinds();
    this.#groupLimits = options.registry.groupLimits();
    this.#rateLimits = options.registry.rateLimits();
    this.#leaseMs = options.leaseMs ?? LEASE_MS;
    this.#log = deps.logger.child({ loop: "jobs", workerId: this.workerId });
    const now = () => deps.clock.now().getTime(); // database down: one line, one a minute, recovery
    this.#outage = createOutageLog({ logger: this.#log, what: "job loop statement", now });
    const emit = (event: JobEvent) => this.#emit(event);
    const runDeps = { db: deps.database.db, clock: deps.clock, logger: this.#log, redactor: deps.redactor };
    this.#queue = new LocalQueue(options.localQueue ?? 0, options.parallelism, options.batchSize);
    this.#completer = createCompleter(
      { ...runDeps, emit },
      // with a local queue outcomes go beside the claims; without, they ride on the next claim
      { workerId: this.workerId, eager: this.#queue.size > 0, outage: this.#outage },
    );
    this.#runs = new JobRuns(runDeps, {
      workerId: this.workerId,
      registry: options.registry,
      parallelism: options.parallelism,
      leaseMs: this.#leaseMs,
      retry: options.retry,
      random: options.random,
      queue: this.#queue,
      completer: this.#completer,
      changed: () => this.#schedulePump(),
      emit,
    });
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
      ? createJobPruner(runDeps, {
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
    return this.#runs.running;
  }

  /** Jobs claimed ahead in the local queue, not started yet. */
  queued(): number {
    return this.#queue.length;
  }

  async start(): Promise<void> {
    if (this.#mode !== "idle") return;
    this.#move("starting");
    if (this.#options.listen !== false)
      this.#unlisten = await listenForJobs(this.#deps.database, this.#log, {
        pollMs: this.#options.pollMs,
        wake: () => this.wake(),
        canceled: (payload) => this.#runs.canceled(payload),
      });
    if (this.mode !== "starting") return this.#unlistenNow(); // stopped while LISTEN was set up
    this.#move("claiming");
    const heartbeatMs = this.#options.heartbeatMs ?? Math.floor(this.#leaseMs / 3);
    if (heartbeatMs > 0) this.#heartbeatTimer = setInterval(() => void this.#runs.heartbeat(), heartbeatMs);
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
   * rest (attempt not counted, due at once) so another process takes them immediately, and writes
   * every outcome (trying again while the database is away, until the same deadline).
   */
  async stop(timeoutMs: number): Promise<{ finished: number; released: number[] }> {
    if (this.#mode === "idle" || this.#mode === "stopping" || this.#mode === "stopped")
      return { finished: 0, released: [] };
    const deadline = Date.now() + timeoutMs;
    this.#move("stopping");
    clearTimeout(this.#backoffTimer);
    clearTimeout(this.#dueTimer?.timer);
    await Promise.all([this.#poller.stop(), this.#pruner?.stop()]);
    await this.#cycle;
    this.#runs.close();
    this.#completer.stopCarrying();
    if (this.#claimUncertain) await this.#adoptOrphans().catch(() => {}); // then released with the queue
    // claimed ahead, never started: given back at once, so another process takes them now
    const releasedQueue = this.#runs.releaseQueued();
    const handlers = this.#runs.handlers();
    await settledWithin(handlers, timeoutMs);
    const left = this.#runs.releaseRunning();
    await this.#completer.drain(deadline);
    const released = [...(await releasedQueue), ...(await left.released)];
    await this.#unlistenNow();
    clearImmediate(this.#pumpScheduled);
    clearInterval(this.#heartbeatTimer);
    await this.#runs.quiet();
    this.#completer.close();
    this.#move("stopped");
    const finished = handlers.length - left.count;
    this.#log.info("job loop stopped", { finished, released: released.length });
    return { finished, released };
  }

  /** The one way the mode changes: refuses a move the diagram at the top does not draw. */
  #move(to: JobLoopMode): void {
    assertMove(this.#mode, to);
    this.#mode = to;
  }

  async #unlistenNow(): Promise<void> {
    await this.#unlisten?.().catch(() => {});
    this.#unlisten = undefined;
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
    if (this.#mode === "waiting") this.#move("claiming");
  }

  /**
   * Sends the next statement unless one is in flight: in claiming mode it carries the outcomes
   * waiting to be written and claims min(batch, the places they and the free ones make) jobs. What
   * piles up meanwhile goes together in the next one. Outcomes with no claim to ride on (waiting)
   * go in a statement of their own beside it, so a NOTIFY that arrives meanwhile is claimed at
   * once, not after that write; with a local queue they always do (the completer writes them).
   */
  #pump(): Promise<boolean> | undefined {
    const mode = this.#mode;
    if (mode !== "claiming" && mode !== "waiting") return this.#cycle;
    const carrying = this.#queue.size === 0;
    if (carrying && mode === "waiting") void this.#completer.flush();
    if (this.#cycle) return this.#cycle;
    const target = this.#queue.target();
    // with a local queue outcomes are written beside the claims: up to twice its size of them may be
    // on their way without holding claims back; without one, each holds its place until recorded
    const held = this.#runs.held(2 * this.#queue.size);
    const free = this.#options.parallelism + target - held - this.#reserved;
    const carriable = carrying ? this.#completer.carriable : 0;
    const n = mode === "claiming" ? Math.min(Math.max(this.#options.batchSize, target), free + carriable) : 0;
    if (n < 1 && !this.#claimUncertain) return undefined;
    const carried = n > 0 && carrying ? this.#completer.take() : undefined;
    const reserved = Math.max(0, n - (carried?.entries.length ?? 0));
    this.#reserved += reserved;
    const cycle = this.#statement(carried, Math.max(0, n), reserved);
    this.#cycle = cycle;
    void cycle.finally(() => {
      this.#cycle = undefined;
      this.#schedulePump();
    });
    return cycle;
  }

  async #statement(carried: Carried | undefined, n: number, reserved: number): Promise<boolean> {
    const wakeUps = this.#wakeUps;
    const startedAt = performance.now();
    let result: ClaimResult;
    try {
      if (this.#claimUncertain) await this.#adoptOrphans();
      // with n = 0 this only looked for a lost claim's jobs
      const statement = completeAndClaimJobs(this.#deps.database.db, {
        workerId: this.workerId,
        kinds: this.#kinds,
        limit: n,
        now: this.#deps.clock.now(),
        leaseMs: this.#leaseMs,
        complete: carried?.results ?? [],
        groupLimits: this.#groupLimits,
        groupCursor: this.#groupCursor,
        rateLimits: this.#rateLimits,
        batches: this.#options.registry.batches(),
      });
      result = await withTimeout(statement, STATEMENT_TIMEOUT_MS, "job loop statement");
      this.#outage.succeeded();
    } catch (error) {
      this.#outage.failed(error); // retried in a second
      if (carried) this.#completer.putBack(carried, error);
      if (n > 0 && isConnectionFailure(describeDatabaseFailure(error))) this.#claimUncertain = true;
      if (this.#mode === "claiming" || this.#mode === "waiting") this.#backOff();
      return false;
    } finally {
      this.#reserved -= reserved;
    }
    this.#groupCursor = result.cursor;
    if (result.nextAt) this.#wakeAt(result.nextAt.getTime());
    if (n > 0)
      this.#emit({
        type: "claimed",
        count: result.claimed.length,
        requested: n,
        durationMs: performance.now() - startedAt,
      });
    if (carried) this.#completer.settle(carried, result.completed);
    this.#queue.push(result.claimed);
    this.#runs.fill();
    // short because lower priorities or full groups wait: claim again, as long as claims bring jobs
    const drained = result.claimed.length === 0 || !result.more;
    if (
      n > 0 &&
      result.claimed.length < n &&
      drained &&
      wakeUps === this.#wakeUps &&
      this.#mode === "claiming"
    )
      this.#move("waiting");
    return true;
  }

  /**
   * After a claim whose answer was lost: the jobs this worker holds that the loop does not know
   * were claimed by it; they are queued to run (their attempt is counted already) rather than left
   * to wait for their lease.
   */
  async #adoptOrphans(): Promise<void> {
    const known = this.#runs.knownIds();
    const held = await withTimeout(
      heldJobs(this.#deps.database.db, { workerId: this.workerId }),
      STATEMENT_TIMEOUT_MS,
      "job loop statement",
    );
    this.#claimUncertain = false;
    const orphans = held.filter((job) => !known.has(job.id));
    if (orphans.length === 0) return;
    this.#log.warn("jobs claimed by a statement whose answer was lost: running them now", {
      jobs: orphans.map((j) => j.id),
    });
    this.#queue.push(orphans);
  }

  /** A rate-limited job is due at `at` (the database clock): wake then unless a wake-up comes sooner. */
  #wakeAt(at: number): void {
    if (this.#dueTimer && this.#dueTimer.at <= at && this.#dueTimer.at > this.#deps.clock.now().getTime())
      return;
    clearTimeout(this.#dueTimer?.timer);
    const delay = Math.max(1, at - this.#deps.clock.now().getTime());
    const timer = setTimeout(() => {
      this.#dueTimer = undefined;
      if (this.#mode === "waiting" || this.#mode === "claiming") this.wake();
    }, delay);
    this.#dueTimer = { at, timer };
  }

  #backOff(): void {
    this.#move("backoff");
    this.#backoffTimer = setTimeout(() => {
      if (this.#mode !== "backoff") return;
      this.#move("claiming");
      this.#pump();
    }, BACKOFF_MS);
  }

  /** Pump once everything that finished in this turn of the event loop has freed its place. */
  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = setImmediate(() => {
      this.#pumpScheduled = undefined;
      this.#pump();
    });
  }
}
