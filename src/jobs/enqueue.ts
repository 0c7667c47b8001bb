import { sql } from "drizzle-orm";
import type { z } from "zod";
import type { Clock } from "../clock.ts";
import { type Executor, execute, executePrepared } from "../db/client.ts";
import { enqueueDebounced } from "./debounce.ts";
import { type JobKind, MAX_RATE_KEY_LENGTH } from "./registry.ts";

/** The NOTIFY channel an enqueue signals so idle job loops wake at once. */
export const JOBS_CHANNEL = "plinth_jobs";
/** The NOTIFY channel a cancel of a running job signals, payload `<id>:<attempts>`: its loop aborts the run. */
export const JOB_CANCEL_CHANNEL = "plinth_job_cancel";
/** Matches the column default and `BackgroundProcessing:JobMaxAttempts`' default. */
export const DEFAULT_MAX_ATTEMPTS = 10;

export interface EnqueueContext {
  clock: Clock;
  /** `BackgroundProcessing:JobMaxAttempts`; a kind's own `maxAttempts` wins, an enqueue's wins over both. */
  defaultMaxAttempts?: number;
}

/** The enqueue context of a process: its clock and `BackgroundProcessing:JobMaxAttempts`. */
export function enqueueContext(deps: {
  clock: Clock;
  config: { settings: { BackgroundProcessing: { JobMaxAttempts: number } } };
}): EnqueueContext {
  return { clock: deps.clock, defaultMaxAttempts: deps.config.settings.BackgroundProcessing.JobMaxAttempts };
}

export interface EnqueueOptions {
  /** Not before this time (a delayed job). Default: now. */
  runAfter?: Date;
  maxAttempts?: number;
  /** While a job with this key is pending, processing or failed, enqueueing another is a no-op. */
  dedupKey?: string;
  /**
   * Fairness group: among due jobs of equal priority the claim takes groups in round robin. A job
   * enqueued for a tenant passes the tenant id (`tenantId` does so unless `groupKey` is given).
   */
  groupKey?: string | null;
  /** The tenant the job works for: its default `groupKey`. */
  tenantId?: string | null;
  /** Higher runs first (before fairness). Default 0. */
  priority?: number;
  /**
   * Trailing debounce: while a job with this `key` is pending (not yet started), enqueueing again
   * replaces its payload and moves its start to `periodMs` from now, but never past `maxWaitMs`
   * after the first of these enqueues. One run, with the last payload (src/jobs/debounce.ts).
   */
  debounce?: DebounceOptions;
}

export interface DebounceOptions {
  key: string;
  periodMs: number;
  maxWaitMs?: number;
}

export interface EnqueueItem<S extends z.ZodType = z.ZodType> {
  job: JobKind<S>;
  payload: z.input<S>;
  options?: EnqueueOptions;
}

/** A payload that does not match its kind's schema: a programming error, nothing is stored. */
export class InvalidJobPayloadError extends Error {
  override name = "InvalidJobPayloadError";
  constructor(
    readonly kind: string,
    readonly issues: { path: string; message: string }[],
  ) {
    super(
      `payload of job kind "${kind}" is not valid: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`,
    );
  }
}

export function describeIssues(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({
    path: issue.path.map(String).join(".") || "(payload)",
    message: issue.message,
  }));
}

export interface Row {
  kind: string;
  payload: unknown;
  runAfter: string;
  maxAttempts: number;
  dedupKey: string | null;
  groupKey: string | null;
  priority: number;
  /** The kind's `rateLimit.key(payload)`; null when the kind has no rate limit. */
  rateKey: string | null;
}

/** The rate key of a payload (parsed) of a kind with a `rateLimit`: a non-empty string. */
function rateKeyOf(job: JobKind, parsed: unknown): string | null {
  if (!job.rateLimit) return null;
  const key = job.rateLimit.key(parsed);
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_RATE_KEY_LENGTH)
    throw new Error(
      `rateLimit.key of job kind "${job.kind}" must return a string of 1 to ${MAX_RATE_KEY_LENGTH} characters`,
    );
  return key;
}

/** A job as it is stored: its payload checked against its kind, the options resolved. */
export function toRow(context: EnqueueContext, now: Date, item: EnqueueItem): Row {
  const { job, payload, options = {} } = item;
  const parsed = job.schema.safeParse(payload);
  if (!parsed.success) throw new InvalidJobPayloadError(job.kind, describeIssues(parsed.error));
  const maxAttempts =
    options.maxAttempts ?? job.maxAttempts ?? context.defaultMaxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new Error("maxAttempts must be a positive integer");
  const priority = options.priority ?? 0;
  if (!Number.isInteger(priority) || Math.abs(priority) > 32_767)
    throw new Error("priority must be an integer between -32767 and 32767");
  // the stored payload is what the caller gave (validated); the handler gets the parsed output at run time
  return {
    kind: job.kind,
    payload: payload ?? {},
    // a batch kind's job waits up to its timeout for others to join it (src/jobs/claim-batch.ts)
    runAfter: new Date((options.runAfter ?? now).getTime() + (job.batch?.timeoutMs ?? 0)).toISOString(),
    maxAttempts,
    dedupKey: options.dedupKey ?? null,
    groupKey: options.groupKey !== undefined ? options.groupKey : (options.tenantId ?? null),
    priority,
    rateKey: rateKeyOf(job, parsed.data),
  };
}

async function insertRows(db: Executor, now: Date, rows: Row[]): Promise<number[]> {
  if (rows.length === 0) return [];
  const nowText = now.toISOString();
  // one JSON parameter for the whole batch: no parameter limit, same SQL on postgres.js and PGlite.
  // The NOTIFY is part of the statement, so it is sent on commit and never for a rolled-back enqueue.
  // Prepared (outside a transaction): the text never changes, and an unnamed statement costs a
  // describe round trip and a plan on every enqueue — part of every job's enqueue→start latency.
  const result = await executePrepared<{ id: string | number }>(
    db,
    sql`with inserted as (
          insert into background_jobs (kind, payload, run_after, max_attempts, dedup_key, group_key, priority, rate_key, created_at, updated_at)
          select r.kind, r.payload, r."runAfter", r."maxAttempts", r."dedupKey", r."groupKey", r.priority, r."rateKey", ${nowText}::timestamptz, ${nowText}::timestamptz
          from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
            as r(kind text, payload jsonb, "runAfter" timestamptz, "maxAttempts" int, "dedupKey" text, "groupKey" text, priority int, "rateKey" text)
          on conflict (dedup_key) where dedup_key is not null and status in ('pending', 'processing', 'failed')
          do nothing
          returning id, run_after
        ),
        wake as (
          select pg_notify(${JOBS_CHANNEL}, '') from (select 1 from inserted where run_after <= ${nowText}::timestamptz limit 1) due
        )
        select id, (select count(*) from wake) as notified from inserted`,
  );
  return result.map((r) => Number(r.id));
}

/**
 * Enqueues one job on `db` (the database or the caller's transaction: rolled back, nothing is
 * enqueued). With a `dedupKey` already held by an unfinished job, returns that job's id and
 * `created: false`.
 */
export async function enqueue<S extends z.ZodType>(
  db: Executor,
  context: EnqueueContext,
  job: JobKind<S>,
  payload: z.input<S>,
  options: EnqueueOptions = {},
): Promise<{ id: number; created: boolean }> {
  const now = context.clock.now();
  const row = toRow(context, now, { job, payload, options } as EnqueueItem);
  if (options.debounce) return enqueueDebounced(db, now, row, options.debounce);
  // the job holding the dedup key may finish between the insert and the look-up: then try again
  for (let attempt = 0; attempt < 3; attempt++) {
    const [id] = await insertRows(db, now, [row]);
    if (id !== undefined) return { id, created: true };
    const [existing] = await execute<{ id: string | number }>(
      db,
      sql`select id from background_jobs
          where dedup_key = ${row.dedupKey} and status in ('pending', 'processing', 'failed')`,
    );
    if (existing) return { id: Number(existing.id), created: false };
  }
  throw new Error("enqueue inserted nothing and found no job holding its dedup key (3 tries)");
}

/** Enqueues many jobs in one statement; returns the ids created (dedup hits are skipped). */
export async function enqueueMany(
  db: Executor,
  context: EnqueueContext,
  items: EnqueueItem[],
): Promise<number[]> {
  const now = context.clock.now();
  const rows = items.map((item) => {
    if (item.options?.debounce) throw new Error("a debounced job is enqueued with enqueue, one at a time");
    return toRow(context, now, item);
  });
  const chunk = 5_000;
  if (rows.length <= chunk) return insertRows(db, now, rows);
  // several statements: all or nothing (a savepoint when `db` is already a transaction)
  return db.transaction(async (tx) => {
    const ids: number[] = [];
    for (let i = 0; i < rows.length; i += chunk)
      ids.push(...(await insertRows(tx, now, rows.slice(i, i + chunk))));
    return ids;
  });
}
