import { z } from "zod";

/** What a handler gets besides its payload. */
export interface JobContext {
  id: number;
  kind: string;
  /** 1 on the first run. */
  attempt: number;
  maxAttempts: number;
  /**
   * Fires when the run must stop: an admin canceled the job (reason `JobCanceledError`), the
   * kind's `timeoutMs` passed (`JobTimeoutError`), the lease is about to end, or the process shuts
   * down. Stop and throw; after a cancel or a timeout nothing the handler returns is recorded.
   */
  signal: AbortSignal;
  /**
   * Records how far the run got (any JSON value, at most `MAX_PROGRESS_BYTES` once serialised),
   * shown by the admin API as `progress`. Calls made while a write is under way are coalesced
   * (the latest wins). Rejects only for a value that is not JSON or is too large.
   */
  progress(value: unknown): Promise<void>;
  /**
   * The results of this job's parents in a flow (`enqueueFlow`), keyed by the parent's flow key
   * (its id, as text, for a parent named by id from outside the flow); a parent that returned
   * nothing (or ended under `onParentFailure: "run"` without a result) is null. Empty for a job
   * without parents.
   */
  parentResults(): Promise<Record<string, unknown>>;
}

/** The cap on one `progress` value, as JSON text (UTF-8 bytes). */
export const MAX_PROGRESS_BYTES = 4_096;
/** The cap on a handler's return value (its result), as JSON text (UTF-8 bytes). */
export const MAX_RESULT_BYTES = 65_536;

/** The abort reason when an admin canceled the job while it ran. */
export class JobCanceledError extends Error {
  override name = "JobCanceledError";
  constructor(readonly jobId: number) {
    super(`job ${jobId} was canceled by an administrator`);
  }
}

/** The abort reason (and the recorded error) when a run outlived its kind's `timeoutMs`. */
export class JobTimeoutError extends Error {
  override name = "JobTimeoutError";
  constructor(
    readonly kind: string,
    readonly timeoutMs: number,
  ) {
    super(`job kind "${kind}" timed out after ${timeoutMs} ms (its timeoutMs)`);
  }
}

/**
 * Runs one job. What it returns (any JSON value, at most `MAX_RESULT_BYTES`) is stored as the job's
 * `result`; a value that is not JSON or is too large fails the run.
 */
export type JobHandler<P> = (payload: P, context: JobContext) => unknown;

/**
 * At most `limit` runs per `periodSeconds` per key, across every process (a token bucket of `limit`
 * tokens refilled at `limit` per period: a burst of up to `limit`, then one every
 * `periodSeconds / limit`). `key` is computed from the payload at enqueue and stored (`rate_key`).
 */
export interface RateLimitOption<P = unknown> {
  // a method, so a kind of a specific payload fits a list of kinds of any payload
  key(payload: P): string;
  limit: number;
  periodSeconds: number;
}

/** The longest rate key (characters). */
export const MAX_RATE_KEY_LENGTH = 500;

/**
 * A batch kind: its handler gets up to `maxSize` jobs of one group (and one priority) in one call. A
 * job waits at most `timeoutMs` for others to join it; a backlog goes in full batches at once.
 */
export interface BatchOption {
  maxSize: number;
  timeoutMs: number;
}

export interface JobKindOptions<P = unknown> {
  /** Overrides `BackgroundProcessing:JobMaxAttempts` for this kind. */
  maxAttempts?: number;
  /** A run longer than this is aborted (`JobTimeoutError`) and counts as a failed attempt. */
  timeoutMs?: number;
  /** At most this many jobs of this kind processing per group, across all processes. */
  groupConcurrency?: number;
  /** At most `limit` runs per `periodSeconds` per `key(payload)`, across every process. */
  rateLimit?: RateLimitOption<P>;
  /** The handler receives an array of up to `maxSize` jobs (`jobBatchWorker`, `defineBatchJob`). */
  batch?: BatchOption;
}

/** A job kind: its name and the zod schema of its payload. What enqueueing it takes. */
export interface JobKind<S extends z.ZodType = z.ZodType> extends JobKindOptions<z.output<S>> {
  kind: string;
  schema: S;
}

/** One job of a batch, as its handler gets it. */
export interface BatchItem<P> {
  id: number;
  payload: P;
  /** 1 on the first run. */
  attempt: number;
  maxAttempts: number;
}

/** What a batch handler gets besides its items. */
export interface BatchContext {
  kind: string;
  /** Fires at the kind's `timeoutMs`, before the leases end, or at shutdown. */
  signal: AbortSignal;
}

/**
 * Runs a batch. It returns nothing (every item succeeded, no result) or one settled result per
 * item, in the items' order: `{ status: "fulfilled", value }` (the item's result) or
 * `{ status: "rejected", reason }` (the item failed: retried alone, with its own backoff) — what
 * `Promise.allSettled(items.map(…))` gives. Throwing fails every item.
 */
export type BatchHandler<P> = (items: BatchItem<P>[], context: BatchContext) => unknown;

/** A kind with the code that runs it: what a registry holds. */
export interface JobDefinition<S extends z.ZodType = z.ZodType> extends JobKind<S> {
  handler: JobHandler<z.output<S>>;
  /** A batch kind's handler (then `handler` is never called). */
  batchHandler?: BatchHandler<z.output<S>>;
}

/**
 * The handler of a kind that needs the process's dependencies, declared once beside the code it
 * calls; a process binds its deps when it registers it (`JobRegistry.add`, like River's
 * `AddWorker`). Modules that only enqueue the kind import the kind, never the worker.
 */
export interface JobWorker<D, S extends z.ZodType = z.ZodType> {
  kind: JobKind<S>;
  // a method, so a worker needing part of Deps fits a list of workers registered with all of it
  handle(deps: D, payload: z.output<S>, context: JobContext): unknown;
}

const KIND = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/;

function checkKind<P>(kind: string, options: JobKindOptions<P>): void {
  if (!KIND.test(kind)) throw new Error(`job kind "${kind}" must be dotted lower-case words`);
  const { timeoutMs, groupConcurrency, rateLimit, batch } = options;
  if (batch !== undefined) {
    if (!Number.isInteger(batch.maxSize) || batch.maxSize < 1 || batch.maxSize > 1_000)
      throw new Error(`batch.maxSize of job kind "${kind}" must be an integer from 1 to 1,000`);
    if (!Number.isInteger(batch.timeoutMs) || batch.timeoutMs < 0 || batch.timeoutMs > 3_600_000)
      throw new Error(`batch.timeoutMs of job kind "${kind}" must be an integer from 0 to 3,600,000`);
    if (rateLimit !== undefined)
      throw new Error(`job kind "${kind}" cannot be a batch kind and rate limited (not supported yet)`);
  }
  if (rateLimit !== undefined) {
    const { key, limit, periodSeconds } = rateLimit;
    if (typeof key !== "function") throw new Error(`rateLimit.key of job kind "${kind}" must be a function`);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1_000_000)
      throw new Error(`rateLimit.limit of job kind "${kind}" must be an integer from 1 to 1,000,000`);
    if (!Number.isFinite(periodSeconds) || periodSeconds <= 0 || periodSeconds > 7 * 86_400)
      throw new Error(`rateLimit.periodSeconds of job kind "${kind}" must be positive, at most a week`);
  }
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= 2 ** 31 - 1))
    throw new Error(`timeoutMs of job kind "${kind}" must be a positive integer of milliseconds`);
  if (groupConcurrency !== undefined && (!Number.isInteger(groupConcurrency) || groupConcurrency < 1))
    throw new Error(`groupConcurrency of job kind "${kind}" must be a positive integer`);
}

/** Declares a job kind (name, payload schema, options); an invalid name or option throws here. */
export function jobKind<S extends z.ZodType>(
  kind: string,
  schema: S,
  options: JobKindOptions<z.output<S>> = {},
): JobKind<S> {
  checkKind(kind, options);
  const { maxAttempts, timeoutMs, groupConcurrency, rateLimit, batch } = options;
  return { kind, schema, maxAttempts, timeoutMs, groupConcurrency, rateLimit, batch };
}

/** The handler of `kind`, taking the deps the process registers it with. */
export function jobWorker<S extends z.ZodType, D>(
  kind: JobKind<S>,
  handle: (deps: D, payload: z.output<S>, context: JobContext) => unknown,
): JobWorker<D, S> {
  return { kind, handle };
}

const notSingle = (kind: string) => () => {
  throw new Error(`job kind "${kind}" is a batch kind: its jobs run through its batch handler`);
};

/** The batch handler of a batch `kind` (declared with `batch`), taking the deps the process registers it with. */
export function jobBatchWorker<S extends z.ZodType, D>(
  kind: JobKind<S>,
  handle: (deps: D, items: BatchItem<z.output<S>>[], context: BatchContext) => unknown,
): JobWorker<D, S> & { handleBatch: typeof handle } {
  if (!kind.batch) throw new Error(`job kind "${kind.kind}" is not declared with batch`);
  return { kind, handle: notSingle(kind.kind), handleBatch: handle };
}

/** A batch kind and its handler in one declaration (tests). */
export function defineBatchJob<S extends z.ZodType>(
  kind: string,
  schema: S,
  handler: BatchHandler<z.output<S>>,
  options: JobKindOptions<z.output<S>> & { batch: BatchOption },
): JobDefinition<S> {
  return { ...jobKind(kind, schema, options), handler: notSingle(kind), batchHandler: handler };
}

/** A kind and a handler that needs nothing from the process, in one declaration (tests, `system.noop`). */
export function defineJob<S extends z.ZodType>(
  kind: string,
  schema: S,
  handler: JobHandler<z.output<S>>,
  options: JobKindOptions<z.output<S>> = {},
): JobDefinition<S> {
  return { ...jobKind(kind, schema, options), handler };
}

/** A worker bound to `deps`: the definition a registry runs. */
export function bindJob<D, S extends z.ZodType>(deps: D, worker: JobWorker<D, S>): JobDefinition<S> {
  const batch = (worker as { handleBatch?: JobBatchHandle<D, S> }).handleBatch;
  return {
    ...worker.kind,
    handler: (payload, context) => worker.handle(deps, payload, context),
    ...(batch ? { batchHandler: (items, context) => batch(deps, items, context) } : {}),
  };
}

type JobBatchHandle<D, S extends z.ZodType> = (
  deps: D,
  items: BatchItem<z.output<S>>[],
  context: BatchContext,
) => unknown;

/** The kinds one process can run. It claims only these, so a rolling deploy that adds a kind is safe. */
export class JobRegistry {
  readonly #definitions = new Map<string, JobDefinition>();

  constructor(definitions: JobDefinition[] = []) {
    for (const definition of definitions) this.register(definition);
  }

  register(definition: JobDefinition): this {
    checkKind(definition.kind, definition);
    if ((definition.batch === undefined) !== (definition.batchHandler === undefined))
      throw new Error(
        `job kind "${definition.kind}": a batch kind needs a batch handler, and only a batch kind has one`,
      );
    if (this.#definitions.has(definition.kind))
      throw new Error(`job kind "${definition.kind}" is registered twice`);
    this.#definitions.set(definition.kind, definition);
    return this;
  }

  /** Registers each worker with the deps its handler gets. */
  add<D>(deps: D, workers: readonly JobWorker<D>[]): this {
    for (const worker of workers) this.register(bindJob(deps, worker));
    return this;
  }

  get(kind: string): JobDefinition | undefined {
    return this.#definitions.get(kind);
  }

  kinds(): string[] {
    return [...this.#definitions.keys()];
  }

  /** Kind → `groupConcurrency`, for the kinds that set one (the claim enforces them). */
  groupLimits(): Record<string, number> {
    const limits: Record<string, number> = {};
    for (const d of this.#definitions.values())
      if (d.groupConcurrency !== undefined) limits[d.kind] = d.groupConcurrency;
    return limits;
  }

  /** The batch kinds: their batch size and wait (the claim takes a batch's jobs together). */
  batches(): BatchCap[] {
    const caps: BatchCap[] = [];
    for (const d of this.#definitions.values())
      if (d.batch) caps.push({ kind: d.kind, maxSize: d.batch.maxSize, timeoutMs: d.batch.timeoutMs });
    return caps;
  }

  /** The kinds that declare a `rateLimit`: their limit and period (the claim enforces them). */
  rateLimits(): RateCap[] {
    const caps: RateCap[] = [];
    for (const d of this.#definitions.values())
      if (d.rateLimit)
        caps.push({ kind: d.kind, limit: d.rateLimit.limit, periodSeconds: d.rateLimit.periodSeconds });
    return caps;
  }
}

/** A batch kind as the claim reads it. */
export interface BatchCap {
  kind: string;
  maxSize: number;
  timeoutMs: number;
}

/** A kind's rate limit as the claim reads it. */
export interface RateCap {
  kind: string;
  limit: number;
  periodSeconds: number;
}

/** Does nothing: for benchmarks and smoke tests. */
export const systemNoop = defineJob("system.noop", z.object({}).passthrough(), () => {});

/** The registry with Plinth's built-in kinds; areas add theirs. */
export function createJobRegistry(definitions: JobDefinition[] = []): JobRegistry {
  return new JobRegistry([systemNoop, ...definitions]);
}
