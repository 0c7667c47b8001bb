import { sql } from "drizzle-orm";
import type { Clock } from "../clock.ts";
import type { Ctx } from "../context.ts";
import { type Database, execute } from "../db/client.ts";
import type { JobStatus } from "../db/schema/jobs.ts";
import { AppError } from "../errors.ts";
import { JOBS_CHANNEL } from "./enqueue.ts";

/** The states a job can be in, for filters and views (the column's enum). */
export { jobStatuses } from "../db/schema/jobs.ts";

export interface JobAdminDeps {
  database: Database;
  clock: Clock;
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
  created_at: string | Date;
  updated_at: string | Date;
  finished_at: string | Date | null;
}

const iso = (value: string | Date) => new Date(value).toISOString();
const isoOrNull = (value: string | Date | null) => (value === null ? null : iso(value));

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
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
    finishedAt: isoOrNull(r.finished_at),
  };
}

export interface ListJobsInput {
  status?: JobStatus;
  kind?: string;
  /** 1–200, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

/** Jobs newest first, filtered by status and kind, keyset-paginated on id. */
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
  const conditions = [sql`true`];
  if (input.status) conditions.push(sql`status = ${input.status}`);
  if (input.kind) conditions.push(sql`kind = ${input.kind}`);
  if (before !== null) conditions.push(sql`id < ${before}`);
  const rows = await execute<JobRow>(
    db,
    sql`select * from background_jobs where ${sql.join(conditions, sql` and `)} order by id desc limit ${limit + 1}`,
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

/**
 * Gives a dead job a fresh set of attempts, due now. 404 for an unknown id; 409 when the job is
 * not dead or another unfinished job now holds its dedup key.
 */
export async function retryDeadJob(deps: JobAdminDeps, ctx: Ctx, input: { id: number }): Promise<JobView> {
  const db = deps.database.db;
  const { id } = input;
  const now = deps.clock.now().toISOString();
  let rows: JobRow[];
  try {
    rows = await execute<JobRow>(
      db,
      sql`update background_jobs
          set status = 'pending', attempts = 0, run_after = ${now}::timestamptz, finished_at = null,
              locked_by = null, locked_until = null, updated_at = ${now}::timestamptz
          where id = ${id} and status = 'dead'
          returning *`,
    );
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
  throw new AppError("conflict", `Only dead jobs can be retried; this one is ${existing.status}.`);
}

function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error; e && typeof e === "object"; e = (e as { cause?: unknown }).cause)
    if ((e as { code?: unknown }).code === "23505") return true;
  return false;
}
