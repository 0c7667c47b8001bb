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
  retryDelayMs,
} from "./queue.ts";
import type { JobRegistry } from "./registry.ts";

/** What running one job reports (the job loop turns these into metrics). */
export type RunEvent =
  | { type: "succeeded"; id: number; kind: string; attempt: number; durationMs: number }
  | { type: "failed"; id: number; kind: string; attempt: number; retryAt: Date; durationMs: number }
  | { type: "dead"; id: number; kind: string; attempt: number; reason: string }
  /** A run whose lease another worker took over: its result was not recorded. */
  | { type: "lost"; id: number; kind: string; attempt: number };

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
  /** The loop aborts it at shutdown; the lease timer aborts it before the lease ends. */
  controller?: AbortController;
  /** True once the run was given back at shutdown: its result is then not recorded. */
  released?: () => boolean;
  /**
   * Takes a success over: the job loop records it together with its next claim. Without it the
   * success is recorded here, alone.
   */
  complete?: (lease: JobLease, startedAt: number) => void;
  /** Called once the handler is done, before its result is written (the loop frees the slot). */
  onHandled?: () => void;
}

/** `handed-off`: a success given to `complete`; `unrecorded`: the write failed, the lease runs out. */
export type RunOutcome = "succeeded" | "handed-off" | "failed" | "dead" | "lost" | "released" | "unrecorded";

type Handled =
  | { ok: true; startedAt: number }
  | { ok: false; error: unknown; durationMs: number }
  | { ok: false; dead: string };

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
  let handled: Handled;
  try {
    handled = await handle(deps, input);
  } finally {
    input.onHandled?.();
  }
  if (input.released?.()) return "released";
  const { job } = input;
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

async function handle(deps: RunJobDeps, input: RunJobInput): Promise<Handled> {
  const { job } = input;
  const definition = input.registry.get(job.kind);
  if (!definition) {
    // claimed only for registered kinds, so this is a registry changed at run time
    return {
      ok: false,
      error: new Error(`no handler for job kind "${job.kind}" in this process`),
      durationMs: 0,
    };
  }
  if (job.attempts > job.maxAttempts) {
    return {
      ok: false,
      dead: `the lease of attempt ${job.maxAttempts} of ${job.maxAttempts} expired: the process running it stopped`,
    };
  }
  const parsed = definition.schema.safeParse(job.payload);
  if (!parsed.success) {
    const issues = describeIssues(parsed.error)
      .map((i) => `${i.path}: ${i.message}`)
      .join("; ");
    return { ok: false, dead: `payload does not match the schema of job kind "${job.kind}": ${issues}` };
  }
  const controller = input.controller ?? new AbortController();
  const remaining = job.lockedUntil.getTime() - deps.clock.now().getTime();
  const timer = setTimeout(
    () => controller.abort(new Error("the job's lease is about to end")),
    Math.max(0, remaining - abortMargin(input.leaseMs ?? LEASE_MS)),
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
    return { ok: true, startedAt };
  } catch (error) {
    return { ok: false, error, durationMs: performance.now() - startedAt };
  } finally {
    clearTimeout(timer);
  }
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
