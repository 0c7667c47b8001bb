import { type SQL, sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";
import type { JobStatus } from "../db/schema/jobs.ts";
import { describeError, type Redactor } from "../redact.ts";

/** A claimed job holds its row this long; after it any process may take the job over (spec 2.1). */
export const LEASE_MS = 5 * 60 * 1000;
/**
 * The most a job loop waits for one of its statements (claim, outcomes, heartbeat, progress). One
 * that has not answered by then counts as failed without an answer (it may yet commit): a driver
 * connection left hanging by an outage must not hold the loop.
 */
export const STATEMENT_TIMEOUT_MS = 10_000;
/** last_error is cut to this many characters. */
export const MAX_ERROR_LENGTH = 2_000;

/** A time as a parameter of a statement. */
export const ts = (date: Date): SQL => sql`${date.toISOString()}::timestamptz`;

export interface ClaimedJob {
  id: number;
  kind: string;
  payload: unknown;
  /** This run's attempt number (already counted). */
  attempts: number;
  maxAttempts: number;
  lockedUntil: Date;
  /** The fairness group (null: the jobs without one). */
  groupKey: string | null;
  priority: number;
  /** The job had dependents (a flow's children) when claimed: its success is recorded with the fan-in. */
  hasDependents?: boolean;
}

/** Which run of a job a worker owns: every update after the claim is fenced on all three. */
export interface JobLease {
  id: number;
  attempts: number;
}

const leases = (items: JobLease[]) =>
  sql`jsonb_to_recordset(${JSON.stringify(items.map((i) => ({ id: i.id, attempts: i.attempts })))}::jsonb)
      as lease(id bigint, attempts int)`;

/**
 * `j.id = any(…)` beside the join on `lease`: the planner cannot see how many rows the JSON holds
 * (it assumes 100) and, with few `processing` rows in its statistics, sometimes joined by scanning
 * every processing row (a bitmap scan of the lease index) instead of looking the ids up in the
 * primary key. With the ids as an array condition the primary key wins however the statistics
 * fall, and a process with hundreds of jobs running never scans them all to record a few.
 */
export function leaseIds(items: JobLease[]): SQL {
  return sql`j.id = any(${`{${items.map((i) => Math.trunc(i.id)).join(",")}}`}::bigint[])`;
}

/** A run's lease after a heartbeat: renewed, or why not (the row's status now; null: the row is gone). */
export interface RenewedLease {
  id: number;
  renewed: boolean;
  lockedUntil: Date | null;
  status: JobStatus | null;
}

/**
 * The heartbeat: moves the lease of every run still held by `workerId` (same fence as completion)
 * to now + `leaseMs`, in one statement. A run not renewed was canceled, finished or taken over:
 * a second statement reads the row's status now (the first one's snapshot may predate a cancel it
 * waited for). The rows are locked in id order first, as every multi-row write of the queue does
 * (docs/jobs.md, "Lock order").
 */
export async function renewLeases(
  db: Executor,
  input: { workerId: string; jobs: JobLease[]; now: Date; leaseMs: number },
): Promise<RenewedLease[]> {
  if (input.jobs.length === 0) return [];
  const now = ts(input.now);
  const until = ts(new Date(input.now.getTime() + input.leaseMs));
  const rows = await execute<{ id: string | number; locked_until: string | Date }>(
    db,
    sql`with locked as materialized (
          select j.id from background_jobs j where ${leaseIds(input.jobs)} order by j.id for no key update
        )
        update background_jobs j
        set locked_until = ${until}, updated_at = ${now}
        from ${leases(input.jobs)}
        where j.id = lease.id and j.attempts = lease.attempts and ${leaseIds(input.jobs)}
          and j.id = any(array(select id from locked))
          and j.locked_by = ${input.workerId} and j.status = 'processing'
        returning j.id, j.locked_until`,
  );
  const renewed = new Map(rows.map((r) => [Number(r.id), new Date(r.locked_until)]));
  const lost = input.jobs.filter((j) => !renewed.has(j.id)).map((j) => j.id);
  const statuses = new Map<number, JobStatus>();
  if (lost.length > 0) {
    const now = await execute<{ id: string | number; status: JobStatus }>(
      db,
      sql`select id, status from background_jobs where id in (${sql.join(
        lost.map((id) => sql`${id}`),
        sql`, `,
      )})`,
    );
    for (const r of now) statuses.set(Number(r.id), r.status);
  }
  return input.jobs.map((j) => {
    const lockedUntil = renewed.get(j.id);
    return lockedUntil
      ? { id: j.id, renewed: true, lockedUntil, status: "processing" }
      : { id: j.id, renewed: false, lockedUntil: null, status: statuses.get(j.id) ?? null };
  });
}

/** Stores a run's progress (JSON text, already size-checked), fenced on its lease. False when the lease is gone. */
export async function recordProgress(
  db: Executor,
  input: { workerId: string; job: JobLease; progress: string },
): Promise<boolean> {
  const rows = await execute<{ id: string | number }>(
    db,
    sql`update background_jobs set progress = ${input.progress}::jsonb
        where id = ${input.job.id} and attempts = ${input.job.attempts}
          and locked_by = ${input.workerId} and status = 'processing'
        returning id`,
  );
  return rows.length > 0;
}

/**
 * Unfinished jobs of kinds not in `kinds` that nobody has picked up since `before` (due and never
 * claimed, or left `processing` with a lease that ended): jobs of a kind no running process
 * handles, e.g. one a new release dropped. Counted by kind, at most 20 kinds.
 */
export async function orphanedJobKinds(
  db: Executor,
  input: { kinds: string[]; before: Date },
): Promise<{ kind: string; count: number }[]> {
  const known =
    input.kinds.length === 0
      ? sql`true`
      : sql`kind not in (${sql.join(
          input.kinds.map((k) => sql`${k}`),
          sql`, `,
        )})`;
  const rows = await execute<{ kind: string; count: number | string }>(
    db,
    sql`select kind, count(*) as count from background_jobs
        where ${known} and (
          (status in ('pending', 'failed') and run_after < ${ts(input.before)})
          or (status = 'processing' and locked_until < ${ts(input.before)}))
        group by kind order by kind limit 20`,
  );
  return rows.map((r) => ({ kind: r.kind, count: Number(r.count) }));
}

/**
 * Deletes succeeded jobs finished before `succeededBefore`, dead and canceled ones before `deadBefore`.
 * A row another transaction holds (a flow naming the job as a parent) is skipped until a later
 * round: the pruner never waits for a row, so it is never part of a deadlock.
 */
export async function pruneJobs(
  db: Executor,
  input: { succeededBefore: Date; deadBefore: Date; batchSize?: number },
): Promise<number> {
  const batch = input.batchSize ?? 1_000;
  let total = 0;
  for (const [status, before] of [
    ["succeeded", input.succeededBefore],
    ["dead", input.deadBefore],
    ["canceled", input.deadBefore],
  ] as const) {
    for (;;) {
      const rows = await execute<{ id: string | number }>(
        db,
        sql`delete from background_jobs where id in (
              select id from background_jobs
              where finished_at is not null and finished_at < ${ts(before)} and status = ${status}
              limit ${batch}
              for update skip locked)
            returning id`,
      );
      total += rows.length;
      if (rows.length < batch) break;
    }
  }
  return total;
}

export interface RetryPolicy {
  baseMs: number;
  maxMs: number;
  /** ±this fraction of the delay, at random. */
  jitter: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { baseMs: 5_000, maxMs: 3_600_000, jitter: 0.2 };

/** Delay before retrying after failed attempt `attempt` (1-based): base × 2^(attempt−1), jittered, capped. */
export function retryDelayMs(
  attempt: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  const jittered = exponential * (1 + policy.jitter * (2 * random() - 1));
  return Math.max(0, Math.round(Math.min(policy.maxMs, jittered)));
}

/** What is stored as last_error: name, message and a few stack frames, redacted and bounded. */
export function describeJobError(error: unknown, redactor: Redactor): string {
  let text: string;
  if (error instanceof Error) {
    // frames only: the lines before them repeat the message (a failed query's lists its values)
    const frames = (error.stack ?? "")
      .split("\n")
      .filter((l) => /^\s+at /.test(l))
      .slice(0, 5)
      .map((l) => l.trim());
    // a failed query's own message lists its parameter values: describeError keeps the cause only
    const described = describeError(error);
    const statement = described.statement ? ` [${described.statement}]` : "";
    text = [`${described.name}: ${described.message}${statement}`, ...frames].join("\n");
  } else {
    text = typeof error === "string" ? error : safeJson(error);
  }
  const redacted = redactor.text(text);
  return redacted.length > MAX_ERROR_LENGTH ? `${redacted.slice(0, MAX_ERROR_LENGTH - 1)}…` : redacted;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
