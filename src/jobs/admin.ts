import { type SQL, sql } from "drizzle-orm";
import { type AuditAction, recordAudit } from "../audit/record.ts";
import type { Clock } from "../clock.ts";
import type { Ctx } from "../context.ts";
import { type Database, type Executor, execute } from "../db/client.ts";
import type { JobStatus } from "../db/schema/jobs.ts";
import { AppError } from "../errors.ts";
import type { Logger } from "../telemetry/logger.ts";
import { JOB_CANCEL_CHANNEL, JOBS_CHANNEL } from "./enqueue.ts";

/** The states a job can be in, for filters and views (the column's enum). */
export { jobStatuses } from "../db/schema/jobs.ts";

export interface JobAdminDeps {
  database: Database;
  clock: Clock;
  logger: Logger;
}

export interface JobView {
  id: number;
  kind: string;
  payload: unknown;
  status: JobStatus;
  runAfter: string;
  attempts: number;
  maxAttempts: number;
  lockedBy: string | null;
  lockedUntil: string | null;
  lastError: string | null;
  dedupKey: string | null;
  /** Fairness group (a tenant's job: its tenant id); null when the job has none. */
  groupKey: string | null;
  /** Higher runs first. */
  priority: number;
  /** What the handler last reported through `context.progress`; null when it never did. */
  progress: unknown;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

interface JobRow {
  id: string | number;
  kind: string;
  payload: unknown;
  status: JobStatus;
  run_after: string | Date;
  attempts: number;
  max_attempts: number;
  locked_by: string | null;
  locked_until: string | Date | null;
  last_error: string | null;
  dedup_key: string | null;
  group_key: string | null;
  priority: number;
  progress: unknown;
  created_at: string | Date;
  updated_at: string | Date;
  finished_at: string | Date | null;
}

const iso = (value: string | Date) => new Date(value).toISOString();
const isoOrNull = (value: string | Date | null) => (value === null ? null : iso(value));
const ts = (date: Date): SQL => sql`${date.toISOString()}::timestamptz`;

function toView(r: JobRow): JobView {
  return {
    id: Number(r.id),
    kind: r.kind,
    payload: r.payload,
    status: r.status,
    runAfter: iso(r.run_after),
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    lockedBy: r.locked_by,
    lockedUntil: isoOrNull(r.locked_until),
    lastError: r.last_error,
    dedupKey: r.dedup_key,
    groupKey: r.group_key,
    priority: r.priority,
    progress: r.progress ?? null,
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
    finishedAt: isoOrNull(r.finished_at),
  };
}

/** Which jobs a list or a bulk action covers; every field narrows, none means all. */
export interface JobFilter {
  status?: JobStatus;
  kind?: string;
  /** A group key (`group_key`), e.g. a tenant id. */
  group?: string;
  /** Created at or after. */
  createdFrom?: Date;
  /** Created before. */
  createdTo?: Date;
}

function filterConditions(filter: JobFilter): SQL[] {
  const conditions: SQL[] = [];
  if (filter.status) conditions.push(sql`status = ${filter.status}`);
  if (filter.kind) conditions.push(sql`kind = ${filter.kind}`);
  if (filter.group !== undefined) conditions.push(sql`group_key = ${filter.group}`);
  if (filter.createdFrom) conditions.push(sql`created_at >= ${ts(filter.createdFrom)}`);
  if (filter.createdTo) conditions.push(sql`created_at < ${ts(filter.createdTo)}`);
  return conditions;
}

const where = (conditions: SQL[]) => (conditions.length === 0 ? sql`true` : sql.join(conditions, sql` and `));

/** The filter as a log line shows it (dates as ISO text, absent fields left out). */
function describeFilter(filter: JobFilter): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(filter))
    if (value !== undefined) out[key] = value instanceof Date ? value.toISOString() : String(value);
  return out;
}

/** What an admin did to jobs, as `jobAdminActed` records it. */
export interface JobAdminAction {
  action: "cancel" | "retry" | "bulk-cancel" | "bulk-retry" | "set-priority" | (string & {});
  /** The job acted on (single actions). */
  jobId?: number;
  /** The filter of a bulk action. */
  filter?: JobFilter;
  /** Jobs changed. */
  count: number;
  /** What else the action set (e.g. the new priority). */
  detail?: Record<string, unknown>;
}

/**
 * The one place an admin action on jobs is recorded: a structured `job admin action` log line with
 * the actor, the action, the job id or the filter, and the count. The audit trail hooks in here.
 */
export async function jobAdminActed(
  deps: { logger: Logger; database: Database },
  ctx: Ctx,
  action: JobAdminAction,
  executor: Executor = deps.database.db,
): Promise<void> {
  const actor =
    ctx.actor.type === "user"
      ? { type: "user", userId: ctx.actor.userId }
      : ctx.actor.type === "system"
        ? { type: "system", name: ctx.actor.name }
        : { type: "anonymous" };
  deps.logger.info("job admin action", {
    actor,
    action: action.action,
    ...(action.jobId !== undefined ? { jobId: action.jobId } : {}),
    ...(action.filter ? { filter: describeFilter(action.filter) } : {}),
    count: action.count,
    ...(action.detail ? { detail: action.detail } : {}),
    ...(ctx.requestId ? { requestId: ctx.requestId } : {}),
  });
  // the audit row (docs/audit.md): in the change's transaction when given one, else in its own
  await executor.transaction((tx) =>
    recordAudit(tx, ctx, {
      action: AUDITED[action.action] ?? "job.retried",
      target: action.jobId === undefined ? null : { type: "job", id: String(action.jobId) },
      details: {
        count: action.count,
        jobKind: action.detail?.jobKind,
        value: action.detail?.priority,
        reason: action.filter ? `bulk ${action.action.replace("bulk-", "")}` : undefined,
        status: action.filter?.status,
        kind: action.filter?.kind,
      },
    }),
  );
}

/** The audit action of each job admin action. */
const AUDITED: Record<string, AuditAction> = {
  retry: "job.retried",
  "bulk-retry": "job.retried",
  cancel: "job.cancelled",
  "bulk-cancel": "job.cancelled",
  "set-priority": "job.priority_changed",
};

export interface ListJobsInput extends JobFilter {
  /** 1–200, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

/** Jobs newest first, filtered by status, kind, group and creation time, keyset-paginated on id. */
export async function listJobs(
  deps: Pick<JobAdminDeps, "database">,
  _ctx: Ctx,
  input: ListJobsInput,
): Promise<{ items: JobView[]; nextCursor: string | null }> {
  const db = deps.database.db;
  const limit = Math.min(200, Math.max(1, input.limit ?? 50));
  let before: number | null = null;
  if (input.cursor !== undefined) {
    if (!/^\d{1,18}$/.test(input.cursor))
      throw new AppError("validation_failed", "The cursor is not valid.", {
        fields: [{ path: "cursor", message: "not a cursor returned by this endpoint" }],
      });
    before = Number(input.cursor);
  }
  const conditions = filterConditions(input);
  if (before !== null) conditions.push(sql`id < ${before}`);
  const rows = await execute<JobRow>(
    db,
    sql`select * from background_jobs where ${where(conditions)} order by id desc limit ${limit + 1}`,
  );
  const items = rows.slice(0, limit).map(toView);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? String(last.id) : null };
}

/** One job; null for an unknown id. */
export async function getJob(
  deps: Pick<JobAdminDeps, "database">,
  _ctx: Ctx,
  input: { id: number },
): Promise<JobView | null> {
  const [row] = await execute<JobRow>(
    deps.database.db,
    sql`select * from background_jobs where id = ${input.id}`,
  );
  return row ? toView(row) : null;
}

/** Statuses a job can be retried from (an admin's retry): it never succeeded and nothing runs it. */
export const RETRYABLE_STATUSES = ["dead", "cancelled"] as const satisfies readonly JobStatus[];
/** Statuses a job can be cancelled in: it has not finished. */
export const CANCELLABLE_STATUSES = [
  "pending",
  "failed",
  "processing",
] as const satisfies readonly JobStatus[];

const inList = (values: readonly string[]) =>
  sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  );

/**
 * Gives a dead or cancelled job a fresh set of attempts, due now. 404 for an unknown id; 409 when
 * the job is in another state or another unfinished job now holds its dedup key.
 */
export async function retryDeadJob(deps: JobAdminDeps, ctx: Ctx, input: { id: number }): Promise<JobView> {
  const db = deps.database.db;
  const { id } = input;
  const now = ts(deps.clock.now());
  let rows: JobRow[];
  try {
    rows = await db.transaction(async (tx) => {
      const retried = await execute<JobRow>(
        tx,
        sql`update background_jobs
            set status = 'pending', attempts = 0, run_after = ${now}, finished_at = null,
                locked_by = null, locked_until = null, updated_at = ${now}
            where id = ${id} and status in (${inList(RETRYABLE_STATUSES)})
            returning *`,
      );
      if (retried[0])
        await jobAdminActed(
          deps,
          ctx,
          { action: "retry", jobId: id, count: 1, detail: { jobKind: retried[0].kind } },
          tx,
        );
      return retried;
    });
  } catch (error) {
    if (isUniqueViolation(error))
      throw new AppError("conflict", "Another unfinished job holds this job's dedup key.");
    throw error;
  }
  const [row] = rows;
  if (row) {
    await execute(db, sql`select pg_notify(${JOBS_CHANNEL}, '')`);
    return toView(row);
  }
  const existing = await getJob(deps, ctx, { id });
  if (!existing) throw new AppError("not_found", "No job with this id.");
  throw new AppError(
    "conflict",
    `Only dead or cancelled jobs can be retried; this one is ${existing.status}.`,
  );
}

/**
 * Cancels a job that has not finished: a pending or failed one never runs, a processing one ends
 * `cancelled` at once and its handler's signal fires on whichever process runs it (NOTIFY on
 * `plinth_job_cancel`; the next heartbeat otherwise). Its late result is not recorded: every
 * write of a run is fenced on `status = 'processing'`. 404 unknown id, 409 a finished job.
 */
export async function cancelJob(deps: JobAdminDeps, ctx: Ctx, input: { id: number }): Promise<JobView> {
  const now = ts(deps.clock.now());
  const [row] = await deps.database.db.transaction(async (tx) => {
    const rows = await execute<JobRow & { was: JobStatus }>(
      tx,
      sql`with target as materialized (
          select id, status, attempts from background_jobs where id = ${input.id} for update
        ),
        changed as (
          update background_jobs j
          set status = 'cancelled', finished_at = ${now}, updated_at = ${now}, locked_by = null, locked_until = null
          from target
          where j.id = target.id and target.status in (${inList(CANCELLABLE_STATUSES)})
          returning j.*
        ),
        signalled as (
          select pg_notify(${JOB_CANCEL_CHANNEL}, target.id || ':' || target.attempts)
          from target join changed on changed.id = target.id
          where target.status = 'processing'
        )
        select changed.*, target.status as was, (select count(*) from signalled) as signalled
        from target left join changed on changed.id = target.id`,
    );
    const cancelled = rows[0];
    if (cancelled && cancelled.id !== null)
      await jobAdminActed(
        deps,
        ctx,
        { action: "cancel", jobId: input.id, count: 1, detail: { jobKind: cancelled.kind } },
        tx,
      );
    return rows;
  });
  if (!row) throw new AppError("not_found", "No job with this id.");
  if (row.id === null)
    throw new AppError("conflict", `Only unfinished jobs can be cancelled; this one is ${row.was}.`);
  return toView(row);
}

/** Rows a bulk action locks and changes per statement (its own transaction): no table-wide lock. */
export const BULK_BATCH_SIZE = 500;

function checkBulkFilter(filter: JobFilter, allowed: readonly JobStatus[], action: string): void {
  if (Object.values(filter).every((v) => v === undefined))
    throw new AppError("validation_failed", `A bulk ${action} needs a filter.`, {
      fields: [{ path: "", message: "give at least one of status, kind, group, createdFrom, createdTo" }],
    });
  if (filter.status && !allowed.includes(filter.status))
    throw new AppError("validation_failed", `A bulk ${action} acts on ${allowed.join(", ")} jobs only.`, {
      fields: [{ path: "status", message: `must be one of ${allowed.join(", ")}` }],
    });
}

/**
 * Runs `batch` over the filtered rows in id order, BULK_BATCH_SIZE at a time, each batch one
 * statement; returns how many rows changed.
 */
async function inBatches(db: Executor, batch: (after: number) => SQL): Promise<number> {
  let after = 0;
  let changed = 0;
  for (;;) {
    let row: { picked: number; changed: number; last: string | number | null } | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        [row] = await execute<{ picked: number; changed: number; last: string | number | null }>(
          db,
          batch(after),
        );
        break;
      } catch (error) {
        // a job enqueued meanwhile took a dedup key, or a deadlock with a claim: the batch again
        if (attempt >= 3 || !(isUniqueViolation(error) || hasCode(error, "40P01"))) throw error;
      }
    }
    changed += Number(row?.changed ?? 0);
    if (!row || Number(row.picked) < BULK_BATCH_SIZE || row.last === null) return changed;
    after = Number(row.last);
  }
}

/**
 * Cancels every unfinished job (pending, failed, processing) the filter matches, in batches;
 * running ones are signalled as `cancelJob` does. Returns how many were cancelled.
 */
export async function cancelJobs(
  deps: JobAdminDeps,
  ctx: Ctx,
  filter: JobFilter,
): Promise<{ changed: number }> {
  checkBulkFilter(filter, CANCELLABLE_STATUSES, "cancel");
  const now = ts(deps.clock.now());
  const conditions = [...filterConditions(filter), sql`status in (${inList(CANCELLABLE_STATUSES)})`];
  const changed = await inBatches(
    deps.database.db,
    (after) => sql`with batch as materialized (
          select id, status, attempts from background_jobs
          where ${where(conditions)} and id > ${after}
          order by id limit ${BULK_BATCH_SIZE}
          for update
        ),
        changed as (
          update background_jobs j
          set status = 'cancelled', finished_at = ${now}, updated_at = ${now}, locked_by = null, locked_until = null
          from batch where j.id = batch.id
          returning j.id
        ),
        signalled as (
          select pg_notify(${JOB_CANCEL_CHANNEL}, batch.id || ':' || batch.attempts)
          from batch where batch.status = 'processing'
        )
        select (select count(*) from batch)::int as picked, (select count(*) from changed)::int as changed,
               (select max(id) from batch) as last, (select count(*) from signalled)::int as signalled`,
  );
  await jobAdminActed(deps, ctx, { action: "bulk-cancel", filter, count: changed });
  return { changed };
}

/**
 * Retries every dead or cancelled job the filter matches, in batches: fresh attempts, due now.
 * A job whose dedup key another unfinished job holds stays as it is (of several holding one key,
 * the newest is retried). Returns how many were retried.
 */
export async function retryJobs(
  deps: JobAdminDeps,
  ctx: Ctx,
  filter: JobFilter,
): Promise<{ changed: number }> {
  checkBulkFilter(filter, RETRYABLE_STATUSES, "retry");
  const now = ts(deps.clock.now());
  const conditions = [...filterConditions(filter), sql`status in (${inList(RETRYABLE_STATUSES)})`];
  const changed = await inBatches(
    deps.database.db,
    (after) => sql`with batch as materialized (
          select id, dedup_key from background_jobs
          where ${where(conditions)} and id > ${after}
          order by id limit ${BULK_BATCH_SIZE}
          for update
        ),
        eligible as (
          select b.id from batch b
          where b.dedup_key is null
             or (b.id = (select max(o.id) from batch o where o.dedup_key = b.dedup_key)
                 and not exists (
                   select 1 from background_jobs u
                   where u.dedup_key = b.dedup_key and u.status in ('pending', 'processing', 'failed')))
        ),
        changed as (
          update background_jobs j
          set status = 'pending', attempts = 0, run_after = ${now}, finished_at = null,
              locked_by = null, locked_until = null, updated_at = ${now}
          from eligible where j.id = eligible.id
          returning j.id
        ),
        wake as (select pg_notify(${JOBS_CHANNEL}, '') from (select 1 from changed limit 1) one)
        select (select count(*) from batch)::int as picked, (select count(*) from changed)::int as changed,
               (select max(id) from batch) as last, (select count(*) from wake)::int as woken`,
  );
  await jobAdminActed(deps, ctx, { action: "bulk-retry", filter, count: changed });
  return { changed };
}

function hasCode(error: unknown, code: string): boolean {
  for (let e: unknown = error; e && typeof e === "object"; e = (e as { cause?: unknown }).cause)
    if ((e as { code?: unknown }).code === code) return true;
  return false;
}

function isUniqueViolation(error: unknown): boolean {
  return hasCode(error, "23505");
}

/** Open jobs (not finished) by state and kind, for the console's overview. */
export interface JobSummary {
  /** Counts of jobs in each open state (pending, processing, failed, dead). */
  byStatus: Record<string, number>;
  /** Open jobs per kind and state, most first. */
  byKind: { kind: string; status: string; count: number }[];
}

/**
 * Counts of open jobs (pending, processing, failed, dead) by state and by kind. Finished states
 * (succeeded, cancelled) are counted over the last hour by `jobActivity` instead: the table keeps
 * finished rows for days, and counting them all would read the whole table on every view.
 */
export async function summarizeJobs(deps: Pick<JobAdminDeps, "database">, _ctx: Ctx): Promise<JobSummary> {
  const rows = await execute<{ kind: string; status: string; count: string | number }>(
    deps.database.db,
    sql`select kind, status, count(*) as count from background_jobs
        where status in ('pending', 'processing', 'failed', 'dead')
        group by kind, status order by count(*) desc, kind, status`,
  );
  const byStatus: Record<string, number> = { pending: 0, processing: 0, failed: 0, dead: 0 };
  const byKind = rows.map((r) => ({ kind: r.kind, status: r.status, count: Number(r.count) }));
  for (const r of byKind) byStatus[r.status] = (byStatus[r.status] ?? 0) + r.count;
  return { byStatus, byKind };
}

/** One minute of job activity: runs that succeeded, and failed attempts (retrying or dead). */
export interface JobActivityMinute {
  /** Start of the minute. */
  at: string;
  succeeded: number;
  failed: number;
}

/**
 * Throughput and failures per minute over the last `minutes` (default 60), oldest first, every
 * minute present: succeeded runs by their finish time; failures are jobs that went dead in the
 * minute, and jobs waiting for a retry whose last attempt failed in it (a job that failed several
 * times counts at its latest failure).
 */
export async function jobActivity(
  deps: Pick<JobAdminDeps, "database" | "clock">,
  _ctx: Ctx,
  input: { minutes?: number } = {},
): Promise<JobActivityMinute[]> {
  const minutes = Math.min(24 * 60, Math.max(1, input.minutes ?? 60));
  const now = deps.clock.now();
  const end = new Date(Math.floor(now.getTime() / 60_000) * 60_000 + 60_000);
  const start = new Date(end.getTime() - minutes * 60_000);
  const rows = await execute<{ minute: string | Date; succeeded: string | number; failed: string | number }>(
    deps.database.db,
    sql`select date_trunc('minute', at) as minute,
               count(*) filter (where outcome = 'succeeded') as succeeded,
               count(*) filter (where outcome = 'failed') as failed
        from (
          select finished_at as at, case when status = 'succeeded' then 'succeeded' else 'failed' end as outcome
          from background_jobs
          where finished_at >= ${start.toISOString()}::timestamptz and finished_at < ${end.toISOString()}::timestamptz
            and status in ('succeeded', 'dead')
          union all
          select updated_at, 'failed' from background_jobs
          where status = 'failed' and updated_at >= ${start.toISOString()}::timestamptz
            and updated_at < ${end.toISOString()}::timestamptz
        ) runs
        group by 1`,
  );
  const byMinute = new Map(rows.map((r) => [new Date(r.minute).getTime(), r]));
  const out: JobActivityMinute[] = [];
  for (let t = start.getTime(); t < end.getTime(); t += 60_000) {
    const r = byMinute.get(t);
    out.push({
      at: new Date(t).toISOString(),
      succeeded: Number(r?.succeeded ?? 0),
      failed: Number(r?.failed ?? 0),
    });
  }
  return out;
}

/** The range of `background_jobs.priority` an admin (and enqueue) may set. */
export const MAX_JOB_PRIORITY = 32_767;

/**
 * Sets a waiting job's priority (pending, or failed awaiting its retry); the next claims honour it.
 * 404 for an unknown id; 409 when the job is running or finished.
 */
export async function setJobPriority(
  deps: JobAdminDeps,
  ctx: Ctx,
  input: { id: number; priority: number },
): Promise<JobView> {
  const { id, priority } = input;
  if (!Number.isInteger(priority) || Math.abs(priority) > MAX_JOB_PRIORITY)
    throw new AppError("validation_failed", "The priority is not valid.", {
      fields: [{ path: "priority", message: `an integer from -${MAX_JOB_PRIORITY} to ${MAX_JOB_PRIORITY}` }],
    });
  const now = deps.clock.now().toISOString();
  const [row] = await deps.database.db.transaction(async (tx) => {
    const changed = await execute<JobRow>(
      tx,
      sql`update background_jobs set priority = ${priority}, updated_at = ${now}::timestamptz
          where id = ${id} and status in ('pending', 'failed')
          returning *`,
    );
    if (changed[0])
      await jobAdminActed(
        deps,
        ctx,
        { action: "set-priority", jobId: id, count: 1, detail: { priority, jobKind: changed[0].kind } },
        tx,
      );
    return changed;
  });
  if (row) return toView(row);
  const existing = await getJob(deps, ctx, { id });
  if (!existing) throw new AppError("not_found", "No job with this id.");
  throw new AppError(
    "conflict",
    `Only a pending or failed job's priority can change; this one is ${existing.status}.`,
  );
}

/**
 * How many jobs a bulk action on `filter` would change now: the unfinished ones for a cancel, the
 * dead and cancelled ones for a retry (a retry skips a job whose dedup key another unfinished job
 * holds, so it may change fewer). What the console shows before an operator confirms.
 */
export async function countBulkTargets(
  deps: Pick<JobAdminDeps, "database">,
  _ctx: Ctx,
  input: { action: "cancel" | "retry"; filter: JobFilter },
): Promise<number> {
  const allowed = input.action === "cancel" ? CANCELLABLE_STATUSES : RETRYABLE_STATUSES;
  checkBulkFilter(input.filter, allowed, input.action);
  const conditions = [...filterConditions(input.filter), sql`status in (${inList(allowed)})`];
  const [row] = await execute<{ count: string | number }>(
    deps.database.db,
    sql`select count(*) as count from background_jobs where ${where(conditions)}`,
  );
  return Number(row?.count ?? 0);
}
