import type { Clock } from "../clock.ts";
import type { Executor } from "../db/client.ts";
import type { Redactor } from "../redact.ts";
import type { Logger } from "../telemetry/logger.ts";
import { describeIssues } from "./enqueue.ts";
import {
  type ClaimedJob,
  completeJobs,
  DEFAULT_RETRY_POLICY,
  describeJobError,
  failJob,
  type JobLease,
  LEASE_MS,
  type RetryPolicy,
  recordProgress,
  retryDelayMs,
} from "./queue.ts";
import { JobCancelledError, type JobRegistry, JobTimeoutError, MAX_PROGRESS_BYTES } from "./registry.ts";

/** What running one job reports (the job loop turns these into metrics). */
export type RunEvent =
  | { type: "succeeded"; id: number; kind: string; attempt: number; durationMs: number }
  | { type: "failed"; id: number; kind: string; attempt: number; retryAt: Date; durationMs: number }
  | { type: "dead"; id: number; kind: string; attempt: number; reason: string }
  /** A run whose lease another worker took over: its result was not recorded. */
  | { type: "lost"; id: number; kind: string; attempt: number }
  /** A run an admin cancelled: its handler's signal fired, nothing more is recorded. */
  | { type: "cancelled"; id: number; kind: string; attempt: number };

export interface RunJobDeps {
  db: Executor;
  clock: Clock;
  /** Carries the loop's fields (`loop`, `workerId`) on the lines written here. */
  logger: Logger;
  redactor: Redactor;
  emit?: (event: RunEvent) => void;
}

export interface RunJobInput {
  /** A run claimed by `workerId`: every write below is fenced on its lease. */
  job: ClaimedJob;
  workerId: string;
  registry: JobRegistry;
  leaseMs?: number;
  retry?: RetryPolicy;
  random?: () => number;
  /** The loop aborts it at shutdown and on a cancel; the lease timer aborts it before the lease ends. */
  controller?: AbortController;
  /**
   * False when the caller keeps the lease alive and aborts before it ends itself (the job loop's
   * heartbeat); by default a timer aborts the handler `abortMargin` before the claimed lease ends.
   */
  leaseTimer?: boolean;
  /** True once the run was given back at shutdown: its result is then not recorded. */
  released?: () => boolean;
  /**
   * Takes a success over: the job loop records it together with its next claim. Without it the
   * success is recorded here, alone.
   */
  complete?: (lease: JobLease, startedAt: number) => void;
  /**
   * Called once the handler is done (the loop frees the slot): before its result is written, or,
   * after a timeout or a cancel (recorded at once), when the handler finally returns.
   */
  onHandled?: () => void;
}

/** `handed-off`: a success given to `complete`; `unrecorded`: the write failed, the lease runs out. */
export type RunOutcome =
  | "succeeded"
  | "handed-off"
  | "failed"
  | "dead"
  | "lost"
  | "released"
  | "unrecorded"
  | "cancelled";

/** `settled`: the handler's own end (later than the result after a timeout or a cancel). */
type Handled = { settled: Promise<unknown> } & (
  | { ok: true; startedAt: number }
  | { ok: false; error: unknown; durationMs: number }
  | { ok: false; dead: string }
  | { ok: false; cancelled: true }
);

/** Before the lease ends the handler's signal fires, leaving this much for it to stop and report. */
export function abortMargin(leaseMs: number): number {
  return Math.min(30_000, Math.floor(leaseMs / 10));
}

/**
 * Runs one claimed job: checks its kind, attempt and payload, calls the handler with a signal that
 * fires before the lease ends, then records the result fenced on the lease: succeeded, failed with
 * a retry time (backoff), or dead (attempts used up, invalid payload). Never rejects.
 */
export async function runJob(deps: RunJobDeps, input: RunJobInput): Promise<RunOutcome> {
  const handled = await handle(deps, input);
  // the slot stays taken until the handler returns, even when its result was settled earlier
  void handled.settled.then(() => input.onHandled?.());
  if (input.released?.()) return "released";
  const { job } = input;
  if ("cancelled" in handled) {
    deps.logger.info("job cancelled while running; its handler was signalled", {
      jobId: job.id,
      kind: job.kind,
      attempt: job.attempts,
    });
    emit(deps, { type: "cancelled", id: job.id, kind: job.kind, attempt: job.attempts });
    return "cancelled";
  }
  if (handled.ok) {
    const lease: JobLease = { id: job.id, attempts: job.attempts };
    if (input.complete) {
      input.complete(lease, handled.startedAt);
      return "handed-off";
    }
    try {
      const done = await completeJobs(deps.db, {
        workerId: input.workerId,
        jobs: [lease],
        now: deps.clock.now(),
      });
      if (!done.includes(job.id)) return reportLost(deps, job);
      emit(deps, {
        type: "succeeded",
        id: job.id,
        kind: job.kind,
        attempt: job.attempts,
        durationMs: performance.now() - handled.startedAt,
      });
      return "succeeded";
    } catch (error) {
      deps.logger.error("recording a finished job failed", { jobId: job.id, error });
      return "unrecorded";
    }
  }
  if ("dead" in handled) return recordDead(deps, input, handled.dead);
  return recordFailure(deps, input, handled.error, handled.durationMs);
}

const settledNow: Promise<unknown> = Promise.resolve();

async function handle(deps: RunJobDeps, input: RunJobInput): Promise<Handled> {
  const { job } = input;
  const definition = input.registry.get(job.kind);
  if (!definition) {
    // claimed only for registered kinds, so this is a registry changed at run time
    return {
      ok: false,
      error: new Error(`no handler for job kind "${job.kind}" in this process`),
      durationMs: 0,
      settled: settledNow,
    };
  }
  if (job.attempts > job.maxAttempts) {
    return {
      ok: false,
      dead: `the lease of attempt ${job.maxAttempts} of ${job.maxAttempts} expired: the process running it stopped`,
      settled: settledNow,
    };
  }
  const parsed = definition.schema.safeParse(job.payload);
  if (!parsed.success) {
    const issues = describeIssues(parsed.error)
      .map((i) => `${i.path}: ${i.message}`)
      .join("; ");
    return {
      ok: false,
      dead: `payload does not match the schema of job kind "${job.kind}": ${issues}`,
      settled: settledNow,
    };
  }
  const controller = input.controller ?? new AbortController();
  const { signal } = controller;
  const timers: ReturnType<typeof setTimeout>[] = [];
  if (input.leaseTimer !== false) {
    const remaining = job.lockedUntil.getTime() - deps.clock.now().getTime();
    timers.push(
      setTimeout(
        () => controller.abort(new Error("the job's lease is about to end")),
        Math.max(0, remaining - abortMargin(input.leaseMs ?? LEASE_MS)),
      ),
    );
  }
  const { timeoutMs } = definition;
  if (timeoutMs !== undefined)
    timers.push(setTimeout(() => controller.abort(new JobTimeoutError(job.kind, timeoutMs)), timeoutMs));
  // a cancel or a timeout settles the run at once; a lease end or a shutdown waits for the handler
  let stopWaiting!: () => void;
  const interrupted = new Promise<"interrupted">((resolve) => {
    const check = () => {
      if (signal.reason instanceof JobCancelledError || signal.reason instanceof JobTimeoutError)
        resolve("interrupted");
    };
    stopWaiting = () => signal.removeEventListener("abort", check);
    if (signal.aborted) check();
    else signal.addEventListener("abort", check, { once: true });
  });
  const startedAt = performance.now();
  const running = (async () =>
    definition.handler(parsed.data, {
      id: job.id,
      kind: job.kind,
      attempt: job.attempts,
      maxAttempts: job.maxAttempts,
      signal,
      progress: progressReporter(deps, input),
    }))().then(
    () => ({ ok: true as const }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  const settled = running.finally(() => {
    for (const timer of timers) clearTimeout(timer);
    stopWaiting();
  });
  const first = await Promise.race([running, interrupted]);
  const durationMs = performance.now() - startedAt;
  // the reason decides, also when the handler returned in the same turn as the abort
  if (signal.reason instanceof JobCancelledError) return { ok: false, cancelled: true, settled };
  if (signal.reason instanceof JobTimeoutError)
    return { ok: false, error: signal.reason, durationMs, settled };
  if (first === "interrupted") return { ok: false, error: signal.reason, durationMs, settled }; // not reached
  if (first.ok) return { ok: true, startedAt, settled };
  return { ok: false, error: first.error, durationMs, settled };
}

/**
 * `context.progress` of one run: checks the value (JSON, at most MAX_PROGRESS_BYTES), writes it
 * fenced on the lease, one write at a time with the latest value winning. A failed write is logged,
 * not thrown: progress is for people watching, the job goes on.
 */
function progressReporter(deps: RunJobDeps, input: RunJobInput): (value: unknown) => Promise<void> {
  let next: string | undefined;
  let writing: Promise<void> | undefined;
  const lease = { id: input.job.id, attempts: input.job.attempts };
  const drain = async () => {
    while (next !== undefined) {
      const progress = next;
      next = undefined;
      try {
        await recordProgress(deps.db, { workerId: input.workerId, job: lease, progress });
      } catch (error) {
        deps.logger.warn("recording a job's progress failed", { jobId: lease.id, error });
      }
    }
  };
  return (value) => {
    let text: string | undefined;
    try {
      text = JSON.stringify(value);
    } catch (error) {
      return Promise.reject(new TypeError("job progress must be a JSON value", { cause: error }));
    }
    if (text === undefined) return Promise.reject(new TypeError("job progress must be a JSON value"));
    const bytes = Buffer.byteLength(text, "utf8");
    if (bytes > MAX_PROGRESS_BYTES)
      return Promise.reject(
        new RangeError(`job progress is ${bytes} bytes of JSON; at most ${MAX_PROGRESS_BYTES} are kept`),
      );
    next = text;
    writing ??= drain().finally(() => {
      writing = undefined;
    });
    return writing;
  };
}

function emit(deps: RunJobDeps, event: RunEvent): void {
  try {
    deps.emit?.(event);
  } catch (error) {
    deps.logger.warn("job event hook failed", { error });
  }
}

/** Says that a run's result was not recorded because another worker holds its lease now. */
export function reportLost(deps: RunJobDeps, job: ClaimedJob): "lost" {
  deps.logger.warn("job lease was taken over; result not recorded", { jobId: job.id, kind: job.kind });
  emit(deps, { type: "lost", id: job.id, kind: job.kind, attempt: job.attempts });
  return "lost";
}

/** Reports the successes a batched statement recorded; the others' leases were taken over. */
export function reportCompletions(
  deps: RunJobDeps,
  finished: { job: ClaimedJob; startedAt: number }[],
  completed: number[],
): void {
  if (finished.length === 0) return;
  const done = new Set(completed);
  const now = performance.now();
  for (const { job, startedAt } of finished) {
    if (!done.has(job.id)) reportLost(deps, job);
    else
      emit(deps, {
        type: "succeeded",
        id: job.id,
        kind: job.kind,
        attempt: job.attempts,
        durationMs: now - startedAt,
      });
  }
}

async function recordFailure(
  deps: RunJobDeps,
  input: RunJobInput,
  error: unknown,
  durationMs: number,
): Promise<RunOutcome> {
  const { job } = input;
  if (job.attempts >= job.maxAttempts) return recordDead(deps, input, describeJobError(error, deps.redactor));
  const now = deps.clock.now();
  const delay = retryDelayMs(job.attempts, input.retry ?? DEFAULT_RETRY_POLICY, input.random ?? Math.random);
  const retryAt = new Date(now.getTime() + delay);
  const message = describeJobError(error, deps.redactor);
  try {
    const ok = await failJob(deps.db, {
      workerId: input.workerId,
      job: { id: job.id, attempts: job.attempts },
      now,
      error: message,
      retryAt,
    });
    if (!ok) return reportLost(deps, job);
    deps.logger.warn("job failed; will retry", {
      jobId: job.id,
      kind: job.kind,
      attempt: job.attempts,
      retryAt,
    });
    emit(deps, { type: "failed", id: job.id, kind: job.kind, attempt: job.attempts, retryAt, durationMs });
    return "failed";
  } catch (e) {
    deps.logger.error("recording a failed job failed", { jobId: job.id, error: e });
    return "unrecorded";
  }
}

async function recordDead(deps: RunJobDeps, input: RunJobInput, reason: string): Promise<RunOutcome> {
  const { job } = input;
  const message = deps.redactor.text(reason);
  try {
    const ok = await failJob(deps.db, {
      workerId: input.workerId,
      job: { id: job.id, attempts: job.attempts },
      now: deps.clock.now(),
      error: message,
      retryAt: null,
    });
    if (!ok) return reportLost(deps, job);
    deps.logger.error("job is dead", {
      jobId: job.id,
      kind: job.kind,
      attempt: job.attempts,
      reason: message,
    });
    emit(deps, { type: "dead", id: job.id, kind: job.kind, attempt: job.attempts, reason: message });
    return "dead";
  } catch (e) {
    deps.logger.error("recording a dead job failed", { jobId: job.id, error: e });
    return "unrecorded";
  }
}
