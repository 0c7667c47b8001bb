import { withTimeout } from "../runtime/with-timeout.ts";
import type { Completer, RunEvent } from "./completer.ts";
import type { LocalQueue } from "./local-queue.ts";
import { type ClaimedJob, type RetryPolicy, renewLeases, STATEMENT_TIMEOUT_MS } from "./queue.ts";
import { JobCanceledError, type JobRegistry } from "./registry.ts";
import { startBatch } from "./run-batch.ts";
import { abortMargin, type RunJobDeps, startJob } from "./run-job.ts";

export interface JobRunsOptions {
  workerId: string;
  registry: JobRegistry;
  parallelism: number;
  leaseMs: number;
  retry?: RetryPolicy;
  random?: () => number;
  queue: LocalQueue;
  completer: Completer;
  /** Something changed that may let the loop claim or write: a place freed, an outcome to carry. */
  changed: () => void;
  emit: (event: RunEvent) => void;
}

interface Run {
  job: ClaimedJob;
  /** A batch run: every job of it (`job` is the first); its handler holds one slot. */
  members?: ClaimedJob[];
  controller: AbortController;
  /** Resolves when the handler is done. */
  done: Promise<void>;
  /** The handler is done: its slot is free. */
  handled: boolean;
  /** Its outcome is recorded (or dropped, or given up): with `handled`, the run holds no place. */
  settled: boolean;
  /** The lease as last written (claim or heartbeat). */
  lockedUntil: Date;
  leaseTimer: ReturnType<typeof setTimeout> | undefined;
  /** Canceled, taken over or settled: no more heartbeats for it. */
  ended: boolean;
}

/**
 * The runs a job loop holds. A run holds a place (of `parallelism` plus the local queue's target)
 * from its claim until its outcome is recorded or the job is released; its handler slot (at most
 * `parallelism` handlers at once) frees when the handler returns, so the next queued job starts
 * while the outcome is still being written. Also renews the leases of what it holds (heartbeat),
 * fires a run's signal before its lease ends and on a cancel, and gives runs back at shutdown.
 */
export class JobRuns {
  readonly #deps: RunJobDeps;
  readonly #options: JobRunsOptions;
  readonly #runs = new Map<number, Run>();
  /** The batch run each job of a batch other than its first belongs to. */
  readonly #memberOf = new Map<number, Run>();
  #busy = 0;
  #closed = false;
  #renewing: Promise<void> | undefined;

  constructor(deps: RunJobDeps, options: JobRunsOptions) {
    this.#deps = deps;
    this.#options = options;
  }

  /**
   * Places held: running handlers, queued jobs, and finished runs whose outcome is not recorded
   * yet, beyond the first `allowance` of those.
   */
  held(allowance: number): number {
    const unrecorded = this.#runs.size - this.#busy;
    return this.#busy + this.#options.queue.length + Math.max(0, unrecorded - allowance);
  }

  /** Handlers running now. */
  get running(): number {
    return this.#busy;
  }

  /** The jobs held now (runs and queued), by id. */
  knownIds(): Set<number> {
    const queued = this.#options.queue.jobs().map((j) => j.id);
    return new Set([...this.#runs.keys(), ...this.#memberOf.keys(), ...queued]);
  }

  /** Starts queued jobs while handler slots are free (none once closed: the queue is released then). */
  fill(): void {
    const { queue, parallelism, leaseMs } = this.#options;
    while (!this.#closed && this.#busy < parallelism) {
      const job = queue.shift();
      if (!job) return;
      // a lease too short to run in (the heartbeat could not renew it): leave it to its lease
      if (job.lockedUntil.getTime() - this.#deps.clock.now().getTime() <= abortMargin(leaseMs)) {
        this.#dropQueued(job, "expiring");
        continue;
      }
      const batch = this.#options.registry.get(job.kind)?.batch;
      if (batch) this.#start([job, ...queue.takeBatch(job, batch.maxSize - 1)], true);
      else this.#start([job], false);
    }
  }

  /** A NOTIFY on the cancel channel (`<id>:<attempts>`): the run, if it is here, is signalled. */
  canceled(payload: string): void {
    const [id, attempts] = payload.split(":").map(Number);
    if (id === undefined || attempts === undefined) return;
    const queued = this.#options.queue.remove(id, attempts);
    if (queued) {
      this.#dropQueued(queued, "canceled");
      return;
    }
    const run = this.#runs.get(id);
    // a batch goes on when one of its jobs is canceled: that job's outcome is not recorded (fenced)
    if (run && !run.members && run.job.attempts === attempts && !run.handled)
      this.#endRun(run, new JobCanceledError(id));
  }

  /** Renews the lease of every job held, in one statement; one heartbeat at a time. */
  heartbeat(): Promise<void> | undefined {
    if (this.#renewing) return this.#renewing;
    const runs = [...this.#runs.values()].filter((r) => !r.ended);
    const queued = [...this.#options.queue.jobs()];
    if (runs.length === 0 && queued.length === 0) return undefined;
    this.#renewing = this.#renew(runs, queued).finally(() => {
      this.#renewing = undefined;
    });
    return this.#renewing;
  }

  /** Stops starting queued jobs (shutdown). */
  close(): void {
    this.#closed = true;
  }

  /** The handlers still running, to wait for at shutdown. */
  handlers(): Promise<void>[] {
    return [...this.#runs.values()].filter((r) => !r.handled).map((r) => r.done);
  }

  /** Gives the queued jobs back (they never started): the attempt not counted, due now. */
  releaseQueued(): Promise<number[]> {
    return this.#options.completer.release(this.#options.queue.clear());
  }

  /** Aborts the handlers still running and gives their jobs back; their late outcomes are dropped. */
  releaseRunning(): { count: number; released: Promise<number[]> } {
    const left = [...this.#runs.values()].filter((r) => !r.handled);
    for (const run of left) run.controller.abort(new Error("the process is shutting down"));
    const jobs = left.flatMap((r) => r.members ?? [r.job]);
    return { count: left.length, released: this.#options.completer.release(jobs) };
  }

  /** Waits for a heartbeat in flight and clears the lease timers (shutdown). */
  async quiet(): Promise<void> {
    await this.#renewing;
    for (const run of this.#runs.values()) clearTimeout(run.leaseTimer);
  }

  /**
   * Runs one job, or a batch (`batched`: one handler slot, one outcome per job,
   * src/jobs/run-batch.ts); the run holds its place until its handler returned and every outcome
   * is recorded.
   */
  #start(jobs: ClaimedJob[], batched: boolean): void {
    const [first] = jobs;
    if (!first) return;
    const { completer, queue } = this.#options;
    const controller = new AbortController();
    const common = {
      workerId: this.#options.workerId,
      registry: this.#options.registry,
      leaseMs: this.#options.leaseMs,
      retry: this.#options.retry,
      random: this.#options.random,
      controller,
      leaseTimer: false, // the heartbeat keeps the lease; #armLeaseTimer stops the handler before it ends
    } as const;
    const running = batched
      ? startBatch(this.#deps, { ...common, jobs })
      : toBatchShape(startJob(this.#deps, { ...common, job: first }));
    const run: Run = {
      job: first,
      ...(batched ? { members: jobs } : {}),
      controller,
      done: running.handled,
      handled: false,
      settled: false,
      lockedUntil: first.lockedUntil,
      leaseTimer: undefined,
      ended: false,
    };
    this.#runs.set(first.id, run);
    for (const job of jobs.slice(1)) this.#memberOf.set(job.id, run);
    this.#busy++;
    this.#armLeaseTimer(run);
    const startedAt = performance.now();
    void running.handled.then(() => {
      run.handled = true;
      this.#busy--;
      clearTimeout(run.leaseTimer);
      queue.sample((performance.now() - startedAt) / jobs.length);
      this.fill();
      this.#forget(run);
    });
    const recorded = running.outcomes.map((outcome) =>
      outcome.then((o) => {
        const written = completer.record(o);
        this.#options.changed(); // an outcome to write (or to carry on the next claim)
        return written;
      }),
    );
    void Promise.all(recorded).then(() => {
      run.settled = true;
      run.ended = true;
      this.#forget(run);
    });
  }

  #forget(run: Run): void {
    if (!run.handled || !run.settled || this.#runs.get(run.job.id) !== run) return;
    this.#runs.delete(run.job.id);
    for (const job of run.members?.slice(1) ?? []) this.#memberOf.delete(job.id);
    this.#options.changed();
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
      Math.max(0, remaining - abortMargin(this.#options.leaseMs)),
    );
  }

  async #renew(runs: Run[], queued: ClaimedJob[]): Promise<void> {
    const { queue } = this.#options;
    try {
      const held = [...runs.flatMap((r) => r.members ?? [r.job]), ...queued];
      const jobs = held.map((j) => ({ id: j.id, attempts: j.attempts }));
      const renewed = await withTimeout(
        renewLeases(this.#deps.db, {
          workerId: this.#options.workerId,
          jobs,
          now: this.#deps.clock.now(),
          leaseMs: this.#options.leaseMs,
        }),
        STATEMENT_TIMEOUT_MS,
        "renewing job leases",
      );
      const queuedNow = new Map(queue.jobs().map((j) => [j.id, j]));
      for (const lease of renewed) {
        const waiting = queuedNow.get(lease.id);
        if (waiting) {
          if (lease.renewed && lease.lockedUntil) waiting.lockedUntil = lease.lockedUntil;
          else if (queue.remove(waiting.id, waiting.attempts))
            this.#dropQueued(waiting, lease.status === "canceled" ? "canceled" : "lost");
          continue;
        }
        const run = this.#runs.get(lease.id) ?? this.#memberOf.get(lease.id);
        if (!run || run.ended) continue;
        if (run.members) {
          // a batch: its first job's lease times it; one job canceled or taken over records nothing
          if (lease.id === run.job.id && lease.renewed && lease.lockedUntil) {
            run.lockedUntil = lease.lockedUntil;
            if (!run.handled) this.#armLeaseTimer(run);
          }
          continue;
        }
        if (lease.renewed && lease.lockedUntil) {
          run.lockedUntil = lease.lockedUntil;
          if (!run.handled) this.#armLeaseTimer(run);
        } else if (run.handled) {
          run.ended = true; // its outcome's write will find the row changed (canceled or taken over)
        } else if (lease.status === "canceled") {
          this.#endRun(run, new JobCanceledError(lease.id));
        } else if (lease.status === "processing" || lease.status === null) {
          this.#endRun(run, new Error("the job's lease was taken over by another worker"));
        } else {
          run.ended = true; // its result is written already (a timeout recorded as failed)
        }
      }
    } catch (error) {
      // the lease timers still stop the handlers before their leases end
      this.#deps.logger.warn("renewing the leases of running jobs failed", {
        error,
        jobs: runs.length,
        queued: queued.length,
      });
    }
  }

  /** A queued job that will not start here: canceled by an admin, its lease lost or about to end. */
  #dropQueued(job: ClaimedJob, why: "canceled" | "lost" | "expiring"): void {
    const fields = { jobId: job.id, kind: job.kind, attempt: job.attempts };
    const event = { id: job.id, kind: job.kind, attempt: job.attempts };
    if (why === "canceled") {
      this.#deps.logger.info("queued job canceled before it started", fields);
      this.#options.emit({ type: "canceled", ...event });
    } else if (why === "lost") {
      this.#deps.logger.warn("queued job's lease was taken over before it started", fields);
      this.#options.emit({ type: "lost", ...event });
    } else this.#deps.logger.warn("queued job's lease is about to end; left to run again after it", fields);
    this.#options.changed();
  }
}

/** A single run in the shape of a batch's: its one outcome in a list. */
function toBatchShape<O>(running: { handled: Promise<void>; outcome: Promise<O> }): {
  handled: Promise<void>;
  outcomes: Promise<O>[];
} {
  return { handled: running.handled, outcomes: [running.outcome] };
}
