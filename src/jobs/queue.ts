import { type SQL, sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";
import { describeError, type Redactor } from "../redact.ts";

/** A claimed job holds its row this long; after it any process may take the job over (spec 2.1). */
export const LEASE_MS = 5 * 60 * 1000;
/** last_error is cut to this many characters. */
export const MAX_ERROR_LENGTH = 2_000;

export interface ClaimedJob {
  id: number;
  kind: string;
  payload: unknown;
  /** This run's attempt number (already counted). */
  attempts: number;
  maxAttempts: number;
  lockedUntil: Date;
}

export interface ClaimInput {
  workerId: string;
  kinds: string[];
  limit: number;
  now: Date;
  leaseMs?: number;
}

const ts = (date: Date): SQL => sql`${date.toISOString()}::timestamptz`;

interface CycleRow {
  done: boolean;
  id: string | number;
  kind: string;
  payload: unknown;
  attempts: number;
  max_attempts: number;
  locked_until: string | Date;
}

/**
 * One statement: due pending/failed jobs in run_after order plus jobs whose lease expired, only of
 * `kinds`, skipping rows another claimer holds; set to processing with a fresh lease and attempts + 1.
 * Both branches are index scans on partial indexes (finished rows are not in them). The MATERIALIZED
 * CTEs with their LIMITs fix the row set before the UPDATE, so the planner cannot update more rows.
 */
export async function claimJobs(db: Executor, input: ClaimInput): Promise<ClaimedJob[]> {
  return (await completeAndClaimJobs(db, { ...input, complete: [] })).claimed;
}

/**
 * `completeJobs` and `claimJobs` in one round trip: a busy loop records what it finished and takes
 * the next jobs in the same statement. Returns the new runs and the ids actually completed.
 */
export async function completeAndClaimJobs(
  db: Executor,
  input: ClaimInput & { complete: JobLease[] },
): Promise<{ claimed: ClaimedJob[]; completed: number[] }> {
  const limit = input.kinds.length === 0 ? 0 : Math.max(0, input.limit);
  if (limit === 0) {
    const completed = await completeJobs(db, {
      workerId: input.workerId,
      jobs: input.complete,
      now: input.now,
    });
    return { claimed: [], completed };
  }
  const rows = await execute<CycleRow>(db, completeAndClaimStatement({ ...input, limit }));
  const claimed: ClaimedJob[] = [];
  const completed: number[] = [];
  for (const r of rows) {
    if (r.done) completed.push(Number(r.id));
    else
      claimed.push({
        id: Number(r.id),
        kind: r.kind,
        payload: r.payload,
        attempts: r.attempts,
        maxAttempts: r.max_attempts,
        lockedUntil: new Date(r.locked_until),
      });
  }
  return { claimed, completed };
}

/** The statement behind `completeAndClaimJobs` (exported so a test can EXPLAIN it). */
export function completeAndClaimStatement(input: ClaimInput & { complete: JobLease[] }): SQL {
  const limit = input.limit;
  const kinds = sql.join(
    input.kinds.map((k) => sql`${k}`),
    sql`, `,
  );
  const now = ts(input.now);
  const until = new Date(input.now.getTime() + (input.leaseMs ?? LEASE_MS));
  // nothing to record (an idle poll, a NOTIFY wake-up): the claim alone, less to plan
  const recording = input.complete.length > 0;
  const finished = JSON.stringify(input.complete.map((i) => ({ id: i.id, attempts: i.attempts })));
  const completion = recording
    ? sql`lease as materialized (
          select * from jsonb_to_recordset(${finished}::jsonb) as l(id bigint, attempts int)
        ),
        done as (
          update background_jobs j
          set status = 'succeeded', finished_at = ${now}, updated_at = ${now}, locked_by = null, locked_until = null
          from lease
          where j.id = lease.id and j.attempts = lease.attempts
            and j.locked_by = ${input.workerId} and j.status = 'processing'
          returning j.id
        ),`
    : sql``;
  return sql`with ${completion}
        due as materialized (
          select id, run_after as due_at from background_jobs
          where status in ('pending', 'failed') and run_after <= ${now} and kind in (${kinds})
          order by run_after
          limit ${limit}
          for update skip locked
        ),
        expired as materialized (
          select id, locked_until as due_at from background_jobs
          where status = 'processing' and locked_until < ${now} and kind in (${kinds})
            ${recording ? sql`and id not in (select id from lease)` : sql``}
          order by locked_until
          limit ${limit}
          for update skip locked
        ),
        picked as materialized (
          select id from (select * from due union all select * from expired) candidates
          order by due_at
          limit ${limit}
        ),
        claimed as (
          update background_jobs j
          set status = 'processing', locked_by = ${input.workerId}, locked_until = ${ts(until)},
              attempts = j.attempts + 1, updated_at = ${now}
          from picked
          where j.id = picked.id
          returning j.id, j.kind, j.payload, j.attempts, j.max_attempts, j.locked_until
        )
        select false as done, claimed.* from claimed
        ${recording ? sql`union all select true, id, null, null, null, null, null from done` : sql``}`;
}

/** Which run of a job a worker owns: every update after the claim is fenced on all three. */
export interface JobLease {
  id: number;
  attempts: number;
}

const leases = (items: JobLease[]) =>
  sql`jsonb_to_recordset(${JSON.stringify(items.map((i) => ({ id: i.id, attempts: i.attempts })))}::jsonb)
      as lease(id bigint, attempts int)`;

/** Marks runs succeeded; returns the ids actually updated (a run whose lease was taken over is not). */
export async function completeJobs(
  db: Executor,
  input: { workerId: string; jobs: JobLease[]; now: Date },
): Promise<number[]> {
  if (input.jobs.length === 0) return [];
  const now = ts(input.now);
  const rows = await execute<{ id: string | number }>(
    db,
    sql`update background_jobs j
        set status = 'succeeded', finished_at = ${now}, updated_at = ${now}, locked_by = null, locked_until = null
        from ${leases(input.jobs)}
        where j.id = lease.id and j.attempts = lease.attempts
          and j.locked_by = ${input.workerId} and j.status = 'processing'
        returning j.id`,
  );
  return rows.map((r) => Number(r.id));
}

export interface FailInput {
  workerId: string;
  job: JobLease;
  now: Date;
  /** Already redacted and bounded (see `describeJobError`). */
  error: string;
  /** null: no retry, the job is dead. */
  retryAt: Date | null;
}

/** Records a failed run: `failed` with a retry time, or `dead`. False when the lease was lost. */
export async function failJob(db: Executor, input: FailInput): Promise<boolean> {
  const now = ts(input.now);
  const dead = input.retryAt === null;
  const rows = await execute<{ id: string | number }>(
    db,
    sql`update background_jobs
        set status = ${dead ? "dead" : "failed"}, run_after = ${input.retryAt ? ts(input.retryAt) : sql`run_after`},
            last_error = ${input.error.slice(0, MAX_ERROR_LENGTH)}, locked_by = null, locked_until = null,
            updated_at = ${now}, finished_at = ${dead ? now : null}
        where id = ${input.job.id} and attempts = ${input.job.attempts}
          and locked_by = ${input.workerId} and status = 'processing'
        returning id`,
  );
  return rows.length > 0;
}

/**
 * Gives runs back without counting them (shutdown): due at once, lock cleared, attempts as before
 * the claim, so another process takes them immediately.
 */
export async function releaseJobs(
  db: Executor,
  input: { workerId: string; jobs: JobLease[]; now: Date },
): Promise<number[]> {
  if (input.jobs.length === 0) return [];
  const now = ts(input.now);
  const rows = await execute<{ id: string | number }>(
    db,
    sql`update background_jobs j
        set status = case when j.attempts > 1 then 'failed' else 'pending' end, attempts = j.attempts - 1,
            run_after = ${now}, locked_by = null, locked_until = null, updated_at = ${now}
        from ${leases(input.jobs)}
        where j.id = lease.id and j.attempts = lease.attempts
          and j.locked_by = ${input.workerId} and j.status = 'processing'
        returning j.id`,
  );
  return rows.map((r) => Number(r.id));
}

/** Deletes succeeded jobs finished before `succeededBefore` and dead ones before `deadBefore`. */
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

export async function pruneJobs(
  db: Executor,
  input: { succeededBefore: Date; deadBefore: Date; batchSize?: number },
): Promise<number> {
  const batch = input.batchSize ?? 1_000;
  let total = 0;
  for (const [status, before] of [
    ["succeeded", input.succeededBefore],
    ["dead", input.deadBefore],
  ] as const) {
    for (;;) {
      const rows = await execute<{ id: string | number }>(
        db,
        sql`delete from background_jobs where id in (
              select id from background_jobs
              where finished_at is not null and finished_at < ${ts(before)} and status = ${status}
              limit ${batch})
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
