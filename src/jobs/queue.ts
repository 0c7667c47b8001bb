import { type SQL, sql } from "drizzle-orm";
import { type Executor, execute, executePrepared } from "../db/client.ts";
import type { JobStatus } from "../db/schema/jobs.ts";
import { describeError, type Redactor } from "../redact.ts";

/** A claimed job holds its row this long; after it any process may take the job over (spec 2.1). */
export const LEASE_MS = 5 * 60 * 1000;
/** last_error is cut to this many characters. */
export const MAX_ERROR_LENGTH = 2_000;
/** Claims up to this size fill their batch from few groups; larger ones offer fair shares (`completeAndClaimStatement`). */
const SMALL_CLAIM = 16;

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
}

export interface ClaimInput {
  workerId: string;
  kinds: string[];
  limit: number;
  now: Date;
  leaseMs?: number;
  /** Kind → at most this many of its jobs processing per group, across all processes. */
  groupLimits?: Record<string, number>;
  /**
   * Where the round robin over groups resumes: the `cursor` the previous claim returned (groups
   * after it come first, then the walk wraps around). Default '' (the start).
   */
  groupCursor?: string;
}

export interface ClaimResult {
  claimed: ClaimedJob[];
  /** Ids whose runs were recorded as succeeded. */
  completed: number[];
  /** The last group the walk visited: pass it as the next claim's `groupCursor`. */
  cursor: string;
  /**
   * The claim came back short for a reason other than an empty queue: due jobs of a lower
   * priority wait, or a group was at its `groupConcurrency`. Claiming again may find more.
   */
  more: boolean;
}

const ts = (date: Date): SQL => sql`${date.toISOString()}::timestamptz`;

interface CycleRow {
  part: "done" | "claimed" | "meta";
  id: string | number | null;
  kind: string | null;
  payload: unknown;
  attempts: number | null;
  max_attempts: number | null;
  locked_until: string | Date | null;
  group_key: string | null;
  priority: number | null;
  cursor: string | null;
  more: boolean | null;
}

/**
 * One statement: the due pending/failed jobs of `kinds` in fair order (see `completeAndClaimStatement`)
 * plus jobs whose lease expired, skipping rows another claimer holds; set to processing with a
 * fresh lease and attempts + 1.
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
): Promise<ClaimResult> {
  const limit = input.kinds.length === 0 ? 0 : Math.max(0, input.limit);
  const cursor = input.groupCursor ?? "";
  if (limit === 0) {
    const completed = await completeJobs(db, {
      workerId: input.workerId,
      jobs: input.complete,
      now: input.now,
    });
    return { claimed: [], completed, cursor, more: false };
  }
  // prepared: the loop sends the same few texts over and over (planning cost more than running)
  const rows = await executePrepared<CycleRow>(db, completeAndClaimStatement({ ...input, limit }));
  const result: ClaimResult = { claimed: [], completed: [], cursor, more: false };
  for (const r of rows) {
    if (r.part === "done") result.completed.push(Number(r.id));
    else if (r.part === "meta") {
      result.cursor = r.cursor ?? cursor;
      result.more = r.more === true;
    } else
      result.claimed.push({
        id: Number(r.id),
        kind: r.kind as string,
        payload: r.payload,
        attempts: r.attempts as number,
        maxAttempts: r.max_attempts as number,
        lockedUntil: new Date(r.locked_until as string | Date),
        groupKey: r.group_key,
        priority: r.priority as number,
      });
  }
  return result;
}

/**
 * The statement behind `completeAndClaimJobs` (exported so a test can EXPLAIN it). Claim order:
 *
 * 1. Jobs whose lease expired (they already waited a lease), oldest lease first.
 * 2. Due pending/failed jobs of the highest priority that has any (one priority per claim; `more`
 *    says lower ones wait). Within it, groups in round robin: a walk over the distinct group keys
 *    (null is the key '') in key order, starting after `groupCursor` and wrapping around, visits up
 *    to `limit` groups, one index probe each (a skip scan on background_jobs_fair_idx); each
 *    visited group offers its oldest jobs, and the batch takes the first of every group, then the
 *    second, and so on. A claim costs O(limit) probes however many groups and jobs wait.
 * 3. A kind with `groupConcurrency` takes a free slot of (kind, group) in job_group_slots for
 *    each run, by INSERT … ON CONFLICT DO NOTHING: two claimers racing for the last slot cannot
 *    both win, so the limit holds across processes without a lock held between statements.
 *
 * Every CTE that reads background_jobs is an index scan on a partial index; the MATERIALIZED CTEs
 * with their LIMITs fix the row set before the UPDATE.
 */
export function completeAndClaimStatement(input: ClaimInput & { complete: JobLease[] }): SQL {
  const limit = input.limit;
  const kinds = sql.join(
    input.kinds.map((k) => sql`${k}`),
    sql`, `,
  );
  const now = ts(input.now);
  const until = new Date(input.now.getTime() + (input.leaseMs ?? LEASE_MS));
  const cursor = input.groupCursor ?? "";
  const limits = Object.entries(input.groupLimits ?? {})
    .filter(([kind, n]) => input.kinds.includes(kind) && Number.isInteger(n) && n > 0)
    .map(([kind, n]) => ({ kind, n }));
  const limited = limits.length > 0;
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
          where j.id = lease.id and j.attempts = lease.attempts and ${leaseIds(input.complete)}
            and j.locked_by = ${input.workerId} and j.status = 'processing'
          returning j.id
        ),`
    : sql``;
  // due jobs of the top priority (the predicate of background_jobs_fair_idx, then its columns)
  const dueAtTop = sql`status in ('pending', 'failed') and priority = (select priority from top)
      and run_after <= ${now} and kind in (${kinds})`;
  const groupKey = sql`coalesce(group_key, '')`;
  // the first group key after `after` among due jobs of the top priority: one index probe
  const groupAfter = (after: SQL) =>
    sql`(select ${groupKey} from background_jobs where ${dueAtTop} and ${groupKey} ${after}
         order by priority, ${groupKey}, run_after limit 1)`;
  // a group's offer: limit - groups + 1 fills the batch even when all groups but one have a single
  // due job, locking at most about (limit + 1)² / 4 rows. A claim larger than SMALL_CLAIM (a local
  // queue: 500 over 100 groups) offers each group its fair share (limit ÷ groups, rounded up)
  // instead, locking about the rows it takes, not 40,000. A group that gave its whole offer may
  // have more: a claim that came back short then says `more` and the loop claims again at once.
  const candidates = limited
    ? sql`groups as materialized (
          select key, n, case when ${limit}::int <= ${sql.raw(String(SMALL_CLAIM))} then ${limit} - total + 1
                 else least(${limit} - total + 1, ceil(${limit}::numeric / total)::int) end as offer
          from (select key, n, count(*) over () as total from walk) w
        ),
        offered as materialized (
          select c.id, c.kind, c.run_after, g.n, g.key from groups g cross join lateral (
            select id, kind, run_after from background_jobs
            where ${dueAtTop} and ${groupKey} = g.key
            order by priority, ${groupKey}, run_after
            limit g.offer
            for update skip locked) c
        ),
        caps as materialized (
          select * from jsonb_to_recordset(${JSON.stringify(limits)}::jsonb) as l(kind text, n int)
        ),
        ranked as materialized (
          select o.*, row_number() over (partition by o.n order by o.run_after, o.id) as r,
                 row_number() over (partition by o.kind, o.key order by o.run_after, o.id) as rk,
                 caps.n as cap
          from offered o left join caps on caps.kind = o.kind
        ),
        -- free slots as this statement sees them; a slot taken since is caught by the insert
        slotted as materialized (
          select r.*, free.slot from ranked r left join lateral (
            select s as slot from generate_series(1, r.cap) s
            where not exists (select 1 from job_group_slots x
                              where x.kind = r.kind and x.group_key = r.key and x.slot = s)
            order by s offset r.rk - 1 limit 1) free on true
        ),
        fair as materialized (
          select id, kind, key, slot, n, r from slotted
          where cap is null or slot is not null
          order by r, n limit greatest(0, ${limit} - (select count(*) from expired))
        ),
        taken as (
          insert into job_group_slots (kind, group_key, slot, job_id)
          select kind, key, slot, id from fair where slot is not null
          on conflict do nothing
          returning job_id
        ),`
    : sql`groups as materialized (
          select key, n, case when ${limit}::int <= ${sql.raw(String(SMALL_CLAIM))} then ${limit} - total + 1
                 else least(${limit} - total + 1, ceil(${limit}::numeric / total)::int) end as offer
          from (select key, n, count(*) over () as total from walk) w
        ),
        offered as materialized (
          select c.id, c.run_after, g.n, g.key from groups g cross join lateral (
            select id, run_after from background_jobs
            where ${dueAtTop} and ${groupKey} = g.key
            order by priority, ${groupKey}, run_after
            limit g.offer
            for update skip locked) c
        ),
        fair as materialized (
          select id, null::int as slot, n, r from (
            select o.*, row_number() over (partition by o.n order by o.run_after, o.id) as r from offered o) x
          order by r, n limit greatest(0, ${limit} - (select count(*) from expired))
        ),`;
  return sql`with recursive ${completion}
        top as materialized (
          select priority from background_jobs
          where status in ('pending', 'failed') and run_after <= ${now} and kind in (${kinds})
          order by priority desc, ${groupKey} desc, run_after desc
          limit 1
        ),
        -- lap 0: keys after the cursor; lap 1: wrapped around to the smallest key, up to the cursor.
        -- COALESCE evaluates its second probe only when the first found nothing; OFFSET 0 keeps the
        -- planner from copying the probe into every place that reads s.key.
        walk(key, lap, n) as (
          select s.key, case when s.key > ${cursor} then 0 else 1 end, 1
          from (select coalesce(${groupAfter(sql`> ${cursor}`)}, ${groupAfter(sql`>= ''`)}) as key offset 0) s
          where s.key is not null
          union all
          select s.key, case when s.key > w.key then w.lap else 1 end, w.n + 1
          from walk w cross join lateral (
            select coalesce(${groupAfter(sql`> w.key`)},
                            case when w.lap = 0 then ${groupAfter(sql`>= ''`)} end) as key
            offset 0) s
          where w.n < ${limit} and s.key is not null
            and (case when s.key > w.key then w.lap else 1 end = 0 or s.key <= ${cursor})
        ),
        expired as materialized (
          select id, locked_until as due_at from background_jobs
          where status = 'processing' and locked_until < ${now} and kind in (${kinds})
            ${recording ? sql`and id not in (select id from lease)` : sql``}
          order by locked_until
          limit ${limit}
          for update skip locked
        ),
        ${candidates}
        picked as materialized (
          select id, slot from (
            select id, null::int as slot from expired
            union all
            select id, slot from fair
            ${limited ? sql`where slot is null or id in (select job_id from taken)` : sql``}
          ) candidates
        ),
        claimed as (
          update background_jobs j
          set status = 'processing', locked_by = ${input.workerId}, locked_until = ${ts(until)},
              attempts = j.attempts + 1, updated_at = ${now},
              group_slot = case when j.status = 'processing' then j.group_slot else picked.slot end
          from picked
          where j.id = picked.id
          returning j.id, j.kind, j.payload, j.attempts, j.max_attempts, j.locked_until, j.group_key, j.priority
        )
        select 'claimed' as part, claimed.*, null::text as cursor, null::boolean as more from claimed
        ${recording ? sql`union all select 'done', id, null, null, null, null, null, null, null, null, null from done` : sql``}
        union all
        select 'meta', null, null, null, null, null, null, null, null,
          (select key from walk order by n desc limit 1),
          -- a scalar subquery, not EXISTS (which drops the ORDER BY that makes it an index scan)
          (select priority from background_jobs
           where status in ('pending', 'failed') and priority < (select priority from top)
             and run_after <= ${now} and kind in (${kinds})
           order by priority desc, ${groupKey} desc, run_after desc limit 1) is not null
          or exists (select 1 from offered o join groups g on g.key = o.key
                     group by g.key, g.offer having count(*) >= g.offer)
          ${limited ? sql`or exists (select 1 from slotted where cap is not null and slot is null) or (select count(*) from fair where slot is not null) > (select count(*) from taken)` : sql``}`;
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
function leaseIds(items: JobLease[]): SQL {
  return sql`j.id = any(${`{${items.map((i) => Math.trunc(i.id)).join(",")}}`}::bigint[])`;
}

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
        where j.id = lease.id and j.attempts = lease.attempts and ${leaseIds(input.jobs)}
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

/** A run's lease after a heartbeat: renewed, or why not (the row's status now; null: the row is gone). */
export interface RenewedLease {
  id: number;
  renewed: boolean;
  lockedUntil: Date | null;
  status: JobStatus | null;
}

/**
 * The heartbeat: moves the lease of every run still held by `workerId` (same fence as completion)
 * to now + `leaseMs`, in one statement. A run not renewed was cancelled, finished or taken over:
 * a second statement reads the row's status now (the first one's snapshot may predate a cancel it
 * waited for).
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
    sql`update background_jobs j
        set locked_until = ${until}, updated_at = ${now}
        from ${leases(input.jobs)}
        where j.id = lease.id and j.attempts = lease.attempts and ${leaseIds(input.jobs)}
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
        where j.id = lease.id and j.attempts = lease.attempts and ${leaseIds(input.jobs)}
          and j.locked_by = ${input.workerId} and j.status = 'processing'
        returning j.id`,
  );
  return rows.map((r) => Number(r.id));
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

/** Deletes succeeded jobs finished before `succeededBefore`, dead and cancelled ones before `deadBefore`. */
export async function pruneJobs(
  db: Executor,
  input: { succeededBefore: Date; deadBefore: Date; batchSize?: number },
): Promise<number> {
  const batch = input.batchSize ?? 1_000;
  let total = 0;
  for (const [status, before] of [
    ["succeeded", input.succeededBefore],
    ["dead", input.deadBefore],
    ["cancelled", input.deadBefore],
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
