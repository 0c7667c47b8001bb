/**
 * The completer: the one owner of every run's outcome (success, failure with a retry, dead, cancel,
 * release). Runs hand it what they came to (src/jobs/run-job.ts `startJob` decides, writes
 * nothing); it writes them in batches, each fenced on its lease (src/jobs/outcomes.ts), and says
 * what was recorded. A batch goes out in a statement of its own, or rides on the job loop's next
 * claim (`take`, then `settle` or `putBack`), which records it and fills the slots it frees in
 * one round trip.
 *
 * A write that fails is not lost: its outcomes go back to the front and are written again once the
 * database answers (every second, and with the loop's next claim). A write whose answer never came
 * may have committed, so it is written again with `verify`: a row already in the state it asked
 * for, by this attempt, counts as recorded. A batch the database refuses (not a connection failure)
 * is split; a single outcome it refuses is given up (logged; the job runs again after its lease).
 * A batch aborted as a deadlock's victim (40P01) or by a serialization conflict committed nothing
 * and is written again as it was, never split or given up.
 */
import type { Clock } from "../clock.ts";
import type { Executor } from "../db/client.ts";
import { describeDatabaseFailure, isConnectionFailure, isTransientConflict } from "../db/database-failure.ts";
import type { OutageLog } from "../db/outage-log.ts";
import { withTimeout } from "../runtime/with-timeout.ts";
import type { Logger } from "../telemetry/logger.ts";
import { type JobResult, recordResults } from "./outcomes.ts";
import { type ClaimedJob, STATEMENT_TIMEOUT_MS } from "./queue.ts";

/** What a run came to, decided by `startJob`; nothing written yet. */
export type Outcome =
  /** `result`: the handler's return value, checked (JSON, bounded); undefined when it returned nothing. */
  | { type: "succeeded"; job: ClaimedJob; startedAt: number; result?: unknown }
  | { type: "failed"; job: ClaimedJob; error: string; retryAt: Date; durationMs: number }
  | { type: "dead"; job: ClaimedJob; reason: string }
  /** An admin canceled it while it ran: the cancel wrote the row, nothing more is recorded. */
  | { type: "canceled"; job: ClaimedJob };

/**
 * What became of an outcome: recorded as it was; `lost` when another worker holds the lease now
 * (or an admin canceled the job); `released` when the run was given back first; `unrecorded` when
 * it could not be written (the job runs again after its lease).
 */
export type Recorded = "succeeded" | "failed" | "dead" | "canceled" | "lost" | "released" | "unrecorded";

/** What running jobs reports (the job loop turns these into metrics). */
export type RunEvent =
  | { type: "succeeded"; id: number; kind: string; attempt: number; durationMs: number }
  | { type: "failed"; id: number; kind: string; attempt: number; retryAt: Date; durationMs: number }
  | { type: "dead"; id: number; kind: string; attempt: number; reason: string }
  /** A run whose lease another worker took over: its result was not recorded. */
  | { type: "lost"; id: number; kind: string; attempt: number }
  /** A run an admin canceled: its handler's signal fired, nothing more is recorded. */
  | { type: "canceled"; id: number; kind: string; attempt: number };

export type JobEventSink = (event: RunEvent | { type: "released"; ids: number[] }) => void;

export interface CompleterDeps {
  db: Executor;
  clock: Clock;
  logger: Logger;
  emit?: JobEventSink;
}

export interface CompleterOptions {
  workerId: string;
  /** Writes as outcomes arrive (default); false: the owner carries them or calls `flush`. */
  eager?: boolean;
  /** Failed writes are tried again after this long (default one second). */
  retryMs?: number;
  /** Where failed writes are told (one line per outage); the job loop shares its own. */
  outage?: OutageLog;
}

interface Entry {
  job: ClaimedJob;
  outcome: Exclude<Outcome, { type: "canceled" }> | { type: "released" };
  result: JobResult;
  resolve: (recorded: Recorded) => void;
  /** An earlier write of it failed without an answer: it may have committed. */
  uncertain: boolean;
  /** The database refused a batch it was in: it is written on its own. */
  alone: boolean;
  /**
   * A claim that carried it recorded nothing of this success: written once more, with the fan-in
   * (its job may have got dependents since its claim; src/jobs/outcomes.ts `recordingCtes`).
   */
  again: boolean;
}

/** Outcomes a claim statement carries. */
export interface Carried {
  results: JobResult[];
  entries: Entry[];
}

const key = (job: { id: number; attempts: number }) => `${job.id}:${job.attempts}`;

function resultOf(outcome: Exclude<Outcome, { type: "canceled" }>): JobResult {
  const { id, attempts } = outcome.job;
  if (outcome.type === "failed")
    return { id, attempts, status: "failed", runAfter: outcome.retryAt, error: outcome.error };
  if (outcome.type === "dead")
    return outcome.job.hasDependents
      ? { id, attempts, status: "dead", error: outcome.reason, hasDependents: true }
      : { id, attempts, status: "dead", error: outcome.reason };
  const lease = outcome.job.hasDependents ? { id, attempts, hasDependents: true } : { id, attempts };
  return outcome.result === undefined ? lease : { ...lease, result: outcome.result };
}

export function createCompleter(deps: CompleterDeps, options: CompleterOptions): Completer {
  return new Completer(deps, options);
}

export class Completer {
  readonly #deps: CompleterDeps;
  readonly #options: CompleterOptions;
  /** Not written yet, oldest first (a failed write's entries go back to the front). */
  #waiting: Entry[] = [];
  #writing: Promise<boolean> | undefined;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #kicked: ReturnType<typeof setImmediate> | undefined;
  #eager: boolean;
  /** Closed (its loop stopped): nothing more is written. */
  #closed = false;
  /** Runs given back: an outcome that arrives for one of them is dropped. */
  readonly #released = new Set<string>();

  constructor(deps: CompleterDeps, options: CompleterOptions) {
    this.#deps = deps;
    this.#options = options;
    this.#eager = options.eager ?? true;
  }

  /** Outcomes a claim could carry now. */
  get carriable(): number {
    return this.#waiting.filter(carriable).length;
  }

  /** Takes a run's outcome; resolves once it is recorded, dropped or given up. */
  record(outcome: Outcome): Promise<Recorded> {
    const { job } = outcome;
    if (this.#released.size > 0 && this.#released.has(key(job))) return Promise.resolve("released");
    if (outcome.type === "canceled") {
      const fields = { jobId: job.id, kind: job.kind, attempt: job.attempts };
      this.#deps.logger.info("job canceled while running; its handler was signalled", fields);
      this.#emit({ type: "canceled", id: job.id, kind: job.kind, attempt: job.attempts });
      return Promise.resolve("canceled");
    }
    return this.#add(job, outcome, resultOf(outcome));
  }

  /**
   * Gives runs back (shutdown): the attempt not counted, due at once, so another process takes
   * them now. Written at once (and again while the database is away, until `drain` gives up);
   * resolves the ids released.
   */
  async release(jobs: ClaimedJob[]): Promise<number[]> {
    if (jobs.length === 0) return [];
    for (const job of jobs) this.#released.add(key(job));
    const done = jobs.map((job) =>
      this.#add(job, { type: "released" }, { id: job.id, attempts: job.attempts, status: "released" }),
    );
    void this.flush();
    const outcomes = await Promise.all(done);
    const ids = jobs.filter((_, i) => outcomes[i] === "released").map((j) => j.id);
    if (ids.length > 0) {
      this.#deps.logger.info("released unfinished jobs", { ids });
      this.#emit({ type: "released", ids });
    }
    return ids;
  }

  /** Hands what may ride on a claim statement to it; `settle` or `putBack` must follow. */
  take(): Carried | undefined {
    const entries = this.#waiting.filter(carriable);
    if (entries.length === 0) return undefined;
    this.#waiting = this.#waiting.filter((e) => !carriable(e));
    return { entries, results: entries.map((e) => e.result) };
  }

  /** The carrying statement succeeded and recorded `recorded`. */
  settle(carried: Carried, recorded: number[]): void {
    const done = new Set(recorded);
    const again = carried.entries.filter(
      (e) => e.outcome.type === "succeeded" && !e.again && !this.#closed && !done.has(e.job.id),
    );
    for (const e of again) {
      e.again = true;
      if (e.outcome.type === "succeeded")
        e.result = resultOf({ ...e.outcome, job: { ...e.job, hasDependents: true } });
    }
    if (again.length > 0) {
      this.#waiting = [...again, ...this.#waiting];
      this.#kick();
    }
    this.#report(
      carried.entries.filter((e) => !again.includes(e)),
      done,
      new Set(),
    );
  }

  /** The carrying statement failed: its outcomes wait for the next write. */
  putBack(carried: Carried, error: unknown): void {
    this.#failed(carried.entries, error);
  }

  /** No claim carries outcomes any more (shutdown): they are written as they arrive. */
  stopCarrying(): void {
    this.#eager = true;
    void this.flush();
  }

  /** Writes what waits in a statement of its own (one at a time); false when the write failed. */
  flush(): Promise<boolean> | undefined {
    if (this.#writing || this.#closed) return this.#writing;
    const alone = this.#waiting.find((e) => e.alone);
    const batch = alone ? [alone] : this.#waiting;
    if (batch.length === 0) return undefined;
    this.#waiting = alone ? this.#waiting.filter((e) => e !== alone) : [];
    const writing = this.#write(batch).finally(() => {
      this.#writing = undefined;
      // what no claim may carry is written here, whoever asked while this write was under way
      const next = this.#eager ? this.#waiting.length > 0 : this.#waiting.some((e) => !carriable(e));
      if (next && !this.#retryTimer) this.#kick();
    });
    this.#writing = writing;
    return writing;
  }

  /**
   * At shutdown: writes what waits, trying again while the database is away, until `deadline`
   * (epoch ms; at least one try). What is still unwritten then is given up: those jobs run again
   * once their lease ends.
   */
  async drain(deadline: number): Promise<void> {
    for (let tries = 0; ; ) {
      clearTimeout(this.#retryTimer);
      this.#retryTimer = undefined;
      // a write under way may start the next one when it ends: wait for them all
      if (this.#writing) {
        await this.#writing;
        continue;
      }
      if (this.#waiting.length === 0 || (tries > 0 && Date.now() >= deadline)) break;
      tries++;
      if ((await this.flush()) === false) {
        const wait = Math.min(this.#options.retryMs ?? 1_000, deadline - Date.now());
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
    const left = this.#waiting.splice(0);
    if (left.length === 0) return;
    this.#deps.logger.error("job outcomes not recorded at shutdown; those jobs run again after their lease", {
      jobs: left.map((e) => e.job.id),
    });
    for (const e of left) e.resolve("unrecorded");
  }

  /**
   * Nothing more is written (the loop stopped, or one job run alone is done): the retry timer
   * stops, and an outcome that still arrives is given up.
   */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    clearImmediate(this.#kicked);
  }

  /** A write once every outcome that arrives in this turn of the event loop is in: one batch, not one each. */
  #kick(): void {
    this.#kicked ??= setImmediate(() => {
      this.#kicked = undefined;
      void this.flush();
    });
  }

  #add(job: ClaimedJob, outcome: Entry["outcome"], result: JobResult): Promise<Recorded> {
    if (this.#closed) return Promise.resolve("unrecorded");
    return new Promise<Recorded>((resolve) => {
      this.#waiting.push({ job, outcome, result, resolve, uncertain: false, alone: false, again: false });
      if (this.#eager) this.#kick();
    });
  }

  async #write(entries: Entry[]): Promise<boolean> {
    try {
      const { recorded, earlier } = await withTimeout(
        recordResults(this.#deps.db, {
          workerId: this.#options.workerId,
          results: entries.map((e) => e.result),
          now: this.#deps.clock.now(),
          verify: entries.some((e) => e.uncertain),
        }),
        STATEMENT_TIMEOUT_MS,
        "recording job outcomes",
      );
      this.#options.outage?.succeeded();
      this.#report(entries, new Set(recorded), new Set(earlier));
      return true;
    } catch (error) {
      this.#options.outage?.failed(error);
      this.#failed(entries, error);
      return false;
    }
  }

  #failed(entries: Entry[], error: unknown): void {
    const connection = isConnectionFailure(describeDatabaseFailure(error));
    // a deadlock victim (40P01) committed nothing and is not refused: the same batch again
    const conflict = !connection && isTransientConflict(error);
    const [only] = entries;
    if (!connection && !conflict && entries.length === 1 && only?.alone) {
      // the database answered and refused this one outcome: trying again would refuse it again
      this.#deps.logger.error("recording a job's outcome failed; it runs again after its lease", {
        jobId: only.job.id,
        kind: only.job.kind,
        error,
      });
      only.resolve("unrecorded");
      return;
    }
    for (const e of entries) {
      e.uncertain ||= connection;
      e.alone ||= !connection && !conflict;
    }
    this.#waiting = [...entries, ...this.#waiting];
    if (this.#closed) return;
    this.#retryTimer ??= setTimeout(() => {
      this.#retryTimer = undefined;
      void this.flush();
    }, this.#options.retryMs ?? 1_000);
  }

  #report(entries: Entry[], recorded: Set<number>, earlier: Set<number>): void {
    const now = performance.now();
    for (const { job, outcome, resolve } of entries) {
      const base = { id: job.id, kind: job.kind, attempt: job.attempts };
      if (outcome.type === "succeeded" && recorded.has(job.id)) {
        this.#emit({ type: "succeeded", ...base, durationMs: now - outcome.startedAt });
        resolve("succeeded");
        continue;
      }
      const fields = { jobId: job.id, kind: job.kind, attempt: job.attempts };
      if (!recorded.has(job.id) && !earlier.has(job.id)) {
        if (outcome.type !== "released") {
          this.#deps.logger.warn("job lease was taken over; result not recorded", {
            jobId: job.id,
            kind: job.kind,
          });
          this.#emit({ type: "lost", ...base });
        }
        resolve("lost");
      } else if (outcome.type === "succeeded") {
        this.#emit({ type: "succeeded", ...base, durationMs: now - outcome.startedAt });
        resolve("succeeded");
      } else if (outcome.type === "failed") {
        this.#deps.logger.warn("job failed; will retry", { ...fields, retryAt: outcome.retryAt });
        this.#emit({ type: "failed", ...base, retryAt: outcome.retryAt, durationMs: outcome.durationMs });
        resolve("failed");
      } else if (outcome.type === "dead") {
        this.#deps.logger.error("job is dead", { ...fields, reason: outcome.reason });
        this.#emit({ type: "dead", ...base, reason: outcome.reason });
        resolve("dead");
      } else resolve("released");
    }
  }

  #emit(event: Parameters<JobEventSink>[0]): void {
    try {
      this.#deps.emit?.(event);
    } catch (error) {
      this.#deps.logger.warn("job event hook failed", { error });
    }
  }
}

/** Fit to ride on a claim: written before without doubt, and not a release (the loop claims no more then). */
const carriable = (e: Entry) => !e.uncertain && !e.alone && e.outcome.type !== "released";
