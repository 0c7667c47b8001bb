import type { Clock } from "../clock.ts";
import type { Executor } from "../db/client.ts";
import type { Redactor } from "../redact.ts";
import { withTimeout } from "../runtime/with-timeout.ts";
import type { Logger } from "../telemetry/logger.ts";
import {
  type Completer,
  createCompleter,
  type JobEventSink,
  type Outcome,
  type Recorded,
} from "./completer.ts";
import { describeIssues } from "./enqueue.ts";
import { parentResults } from "./parent-results.ts";
import {
  type ClaimedJob,
  DEFAULT_RETRY_POLICY,
  describeJobError,
  LEASE_MS,
  type RetryPolicy,
  recordProgress,
  retryDelayMs,
  STATEMENT_TIMEOUT_MS,
} from "./queue.ts";
import {
  JobCanceledError,
  type JobRegistry,
  JobTimeoutError,
  MAX_PROGRESS_BYTES,
  MAX_RESULT_BYTES,
} from "./registry.ts";

export interface RunJobDeps {
  /** Where the handler's progress is written. */
  db: Executor;
  clock: Clock;
  /** Carries the loop's fields (`loop`, `workerId`) on the lines written here. */
  logger: Logger;
  redactor: Redactor;
}

export interface RunJobInput {
  /** A run claimed by `workerId`: every write of it is fenced on its lease. */
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
}

/** A run under way: what it came to, and when its handler is done. */
export interface RunningJob {
  /**
   * The outcome, decided but not written (the completer writes it): when the handler returned or
   * threw, or at once on a cancel or a timeout, however long the handler goes on.
   */
  outcome: Promise<Outcome>;
  /** The handler's own end: its slot is busy until then. Never rejects. */
  handled: Promise<void>;
}

/** Before the lease ends the handler's signal fires, leaving this much for it to stop and report. */
export function abortMargin(leaseMs: number): number {
  return Math.min(30_000, Math.floor(leaseMs / 10));
}

const settledNow: Promise<void> = Promise.resolve();

/**
 * Runs one claimed job: checks its kind, attempt and payload, calls the handler with a signal that
 * fires before the lease ends (or at the kind's `timeoutMs`, or when the caller aborts), and
 * decides the outcome: succeeded, failed with a retry time (backoff), dead (attempts used up,
 * invalid payload) or canceled. Writes nothing but the handler's progress.
 */
export function startJob(deps: RunJobDeps, input: RunJobInput): RunningJob {
  const { job } = input;
  const definition = input.registry.get(job.kind);
  // claimed only for registered kinds, so this is a registry changed at run time
  if (!definition)
    return failedAtOnce(deps, input, new Error(`no handler for job kind "${job.kind}" in this process`));
  if (job.attempts > job.maxAttempts)
    return deadAtOnce(
      deps,
      job,
      `the lease of attempt ${job.maxAttempts} of ${job.maxAttempts} expired: the process running it stopped`,
    );
  const parsed = definition.schema.safeParse(job.payload);
  if (!parsed.success) {
    const issues = describeIssues(parsed.error)
      .map((i) => `${i.path}: ${i.message}`)
      .join("; ");
    return deadAtOnce(deps, job, `payload does not match the schema of job kind "${job.kind}": ${issues}`);
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
      if (signal.reason instanceof JobCanceledError || signal.reason instanceof JobTimeoutError)
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
      parentResults: () => parentResults(deps.db, { id: job.id }),
    }))().then(
    (value: unknown) => checkedResult(value),
    (error: unknown) => ({ ok: false as const, error }),
  );
  const handled = running.then(() => {
    for (const timer of timers) clearTimeout(timer);
    stopWaiting();
  });
  const outcome = Promise.race([running, interrupted]).then((first): Outcome => {
    const durationMs = performance.now() - startedAt;
    // the reason decides, also when the handler returned in the same turn as the abort
    if (signal.reason instanceof JobCanceledError) return { type: "canceled", job };
    if (signal.reason instanceof JobTimeoutError) return failure(deps, input, signal.reason, durationMs);
    if (first === "interrupted") return failure(deps, input, signal.reason, durationMs); // not reached
    if (first.ok) return { type: "succeeded", job, startedAt, result: first.result };
    return failure(deps, input, first.error, durationMs);
  });
  return { outcome, handled };
}

/** A handler's return value as its result: JSON, at most MAX_RESULT_BYTES; anything else fails the run. */
export function checkedResult(
  value: unknown,
): { ok: true; result?: unknown } | { ok: false; error: unknown } {
  if (value === undefined || value === null) return { ok: true };
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    return { ok: false, error: new TypeError("a job's result must be a JSON value", { cause: error }) };
  }
  if (text === undefined) return { ok: false, error: new TypeError("a job's result must be a JSON value") };
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_RESULT_BYTES)
    return {
      ok: false,
      error: new RangeError(`a job's result is ${bytes} bytes of JSON; at most ${MAX_RESULT_BYTES} are kept`),
    };
  // stored as the JSON it serialises to (a Date becomes its ISO text, undefined fields go)
  return { ok: true, result: JSON.parse(text) };
}

/** A thrown error: failed with a retry time while attempts are left, else dead. */
export function failure(deps: RunJobDeps, input: RunJobInput, error: unknown, durationMs: number): Outcome {
  const { job } = input;
  const message = describeJobError(error, deps.redactor);
  if (job.attempts >= job.maxAttempts) return { type: "dead", job, reason: message };
  const delay = retryDelayMs(job.attempts, input.retry ?? DEFAULT_RETRY_POLICY, input.random ?? Math.random);
  const retryAt = new Date(deps.clock.now().getTime() + delay);
  return { type: "failed", job, error: message, retryAt, durationMs };
}

function failedAtOnce(deps: RunJobDeps, input: RunJobInput, error: Error): RunningJob {
  return { outcome: Promise.resolve(failure(deps, input, error, 0)), handled: settledNow };
}

function deadAtOnce(deps: RunJobDeps, job: ClaimedJob, reason: string): RunningJob {
  return {
    outcome: Promise.resolve({ type: "dead", job, reason: deps.redactor.text(reason) }),
    handled: settledNow,
  };
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
        const write = recordProgress(deps.db, { workerId: input.workerId, job: lease, progress });
        await withTimeout(write, STATEMENT_TIMEOUT_MS, "recording a job's progress");
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

/**
 * One job without the loop: runs it (`startJob`) and records its outcome through `completer`, or
 * a completer of its own (written at once, again every second while the database is away).
 * Resolves what was recorded; the handler may still be running after a timeout or a cancel.
 */
export async function runJob(
  deps: RunJobDeps & { completer?: Completer; emit?: JobEventSink },
  input: RunJobInput,
): Promise<Recorded> {
  const completer = deps.completer ?? createCompleter(deps, { workerId: input.workerId });
  try {
    return await completer.record(await startJob(deps, input).outcome);
  } finally {
    if (!deps.completer) completer.close();
  }
}
