import { type SQL, sql } from "drizzle-orm";
import { type Executor, execute, executePrepared } from "../db/client.ts";
import { batchParts } from "./claim-batch.ts";
import { type RateParts, rateParts } from "./claim-rate.ts";
import { type JobResult, recordingCtes, recordResults } from "./outcomes.ts";
import { type ClaimedJob, LEASE_MS, ts } from "./queue.ts";
import type { BatchCap, RateCap } from "./registry.ts";

/** Claims up to this size fill their batch from few groups; larger ones offer fair shares (`completeAndClaimStatement`). */
const SMALL_CLAIM = 16;

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
  /** The kinds with a `rateLimit` (the claim takes a token of the job's key for each run). */
  rateLimits?: RateCap[];
  /** The batch kinds (the claim takes up to a batch's size of jobs with each one it picks). */
  batches?: BatchCap[];
}

export interface ClaimResult {
  claimed: ClaimedJob[];
  /** Ids whose results were recorded. */
  completed: number[];
  /** The last group the walk visited: pass it as the next claim's `groupCursor`. */
  cursor: string;
  /**
   * The claim came back short for a reason other than an empty queue: due jobs of a lower
   * priority wait, or a group was at its `groupConcurrency`. Claiming again may find more.
   */
  more: boolean;
  /** The next time a rate-limited job of the claimed kinds is due (wake then, not at the next poll). */
  nextAt?: Date;
}

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
  has_dependents: boolean | null;
  cursor: string | null;
  more: boolean | null;
}

const claimedJob = (r: Omit<CycleRow, "part" | "cursor" | "more">): ClaimedJob => ({
  id: Number(r.id),
  kind: r.kind as string,
  payload: r.payload,
  attempts: r.attempts as number,
  maxAttempts: r.max_attempts as number,
  lockedUntil: new Date(r.locked_until as string | Date),
  groupKey: r.group_key,
  priority: r.priority as number,
  hasDependents: r.has_dependents === true,
});

/**
 * One statement: the due pending/failed jobs of `kinds` in fair order (see `completeAndClaimStatement`)
 * plus jobs whose lease expired, skipping rows another claimer holds; set to processing with a
 * fresh lease and attempts + 1.
 */
export async function claimJobs(db: Executor, input: ClaimInput): Promise<ClaimedJob[]> {
  return (await completeAndClaimJobs(db, { ...input, complete: [] })).claimed;
}

/**
 * Records results and claims in one round trip: a busy loop writes what it finished and takes the
 * next jobs in the same statement (both happen, or neither). Returns the new runs and the ids
 * whose results were recorded.
 */
export async function completeAndClaimJobs(
  db: Executor,
  input: ClaimInput & { complete: JobResult[] },
): Promise<ClaimResult> {
  const limit = input.kinds.length === 0 ? 0 : Math.max(0, input.limit);
  const cursor = input.groupCursor ?? "";
  if (limit === 0) {
    const { recorded } = await recordResults(db, {
      workerId: input.workerId,
      results: input.complete,
      now: input.now,
    });
    return { claimed: [], completed: recorded, cursor, more: false };
  }
  // prepared: the loop sends the same few texts over and over (planning cost more than running)
  const rows = await executePrepared<CycleRow>(db, completeAndClaimStatement({ ...input, limit }));
  const result: ClaimResult = { claimed: [], completed: [], cursor, more: false };
  for (const r of rows) {
    if (r.part === "done") result.completed.push(Number(r.id));
    else if (r.part === "meta") {
      result.cursor = r.cursor ?? cursor;
      result.more = r.more === true;
      // the meta row carries the next rate-limited due time in its locked_until column
      if (r.locked_until !== null) result.nextAt = new Date(r.locked_until);
    } else result.claimed.push(claimedJob(r));
  }
  return result;
}

/**
 * The jobs `workerId` holds now (processing under its lease). After a claim whose answer never
 * came (the connection dropped after the database committed it), the ones its loop does not know
 * are that claim's: they are run, not left to wait for their lease.
 */
export async function heldJobs(db: Executor, input: { workerId: string }): Promise<ClaimedJob[]> {
  const rows = await execute<Omit<CycleRow, "part" | "cursor" | "more">>(
    db,
    sql`select id, kind, payload, attempts, max_attempts, locked_until, group_key, priority, has_dependents
        from background_jobs where locked_by = ${input.workerId} and status = 'processing'`,
  );
  return rows.map(claimedJob);
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
export function completeAndClaimStatement(input: ClaimInput & { complete: JobResult[] }): SQL {
  const limit = input.limit;
  const kinds = sql.join(
    input.kinds.map((k) => sql`${k}`),
    sql`, `,
  );
  const now = ts(input.now);
  const until = new Date(input.now.getTime() + (input.leaseMs ?? LEASE_MS));
  const cursor = input.groupCursor ?? "";
  // nothing to record (an idle poll, a NOTIFY wake-up): the claim alone, less to plan
  const recording = input.complete.length > 0;
  const completion = recording
    ? sql`${recordingCtes({ workerId: input.workerId, results: input.complete, now: input.now })},`
    : sql``;
  // due jobs of the top priority (the predicate of background_jobs_fair_idx, then its columns)
  const dueAtTop = sql`status in ('pending', 'failed') and priority = (select priority from top)
      and run_after <= ${now} and kind in (${kinds})`;
  const groupKey = sql`coalesce(group_key, '')`;
  // the first group key after `after` among due jobs of the top priority: one index probe
  const groupAfter = (after: SQL) =>
    sql`(select ${groupKey} from background_jobs where ${dueAtTop} and ${groupKey} ${after}
         order by priority, ${groupKey}, run_after limit 1)`;
  const rate = rateParts({ caps: input.rateLimits ?? [], kinds: input.kinds, now, kindList: kinds });
  const fair = fairCandidates(input, dueAtTop, groupKey, rate);
  const batch = batchParts({ caps: input.batches ?? [], kinds: input.kinds, now });
  // the results are read first: their rows are locked in id order (outcomes.ts, `locked`) before the
  // claim holds any row, so the statement never waits for a row while it holds one out of that order
  const recorded = recording
    ? sql`select 'done' as part, id, null::text as kind, null::jsonb as payload, null::int as attempts,
          null::int as max_attempts, null::timestamptz as locked_until, null::text as group_key,
          null::int as priority, null::boolean as has_dependents, null::text as cursor, null::boolean as more
        from done
        union all`
    : sql``;
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
        ${fair.ctes}
        picked as materialized (
          select id, slot from (
            select id, null::int as slot from expired
            union all
            select id, slot from fair
            ${fair.limited ? sql`where slot is null or id in (select job_id from taken)` : sql``}
          ) candidates
        ),
        ${rate.settle}
        ${batch.ctes}
        claimed as (
          update background_jobs j
          set status = 'processing', locked_by = ${input.workerId}, locked_until = ${ts(until)},
              attempts = j.attempts + 1, updated_at = ${now},
              group_slot = case when j.status = 'processing' then j.group_slot else picked.slot end
          from ${batch.on ? sql`(select id, slot from picked union all select id, null::int from followers) picked` : sql`picked`}
          where j.id = picked.id
          returning j.id, j.kind, j.payload, j.attempts, j.max_attempts, j.locked_until, j.group_key, j.priority,
            j.has_dependents
        )
        ${recorded}
        select 'claimed' as part, claimed.*, null::text as cursor, null::boolean as more from claimed
        union all
        select 'meta', null, null, null, null, null, ${rate.on ? rate.nextAt : sql`null`}, null, null, null,
          (select key from walk order by n desc limit 1),
          -- a scalar subquery, not EXISTS (which drops the ORDER BY that makes it an index scan)
          (select priority from background_jobs
           where status in ('pending', 'failed') and priority < (select priority from top)
             and run_after <= ${now} and kind in (${kinds})
           order by priority desc, ${groupKey} desc, run_after desc limit 1) is not null
          or exists (select 1 from offered o join groups g on g.key = o.key
                     group by g.key, g.offer having count(*) >= g.offer)
          ${fair.more}
          ${rate.more}`;
}

/**
 * The CTEs from the walk's groups to `fair`, the batch of due jobs in round-robin order (each
 * group's first, then its second, …), with the group slots of `groupConcurrency` kinds when the
 * claimed kinds have any (`taken`: the slots this statement won).
 */
function fairCandidates(
  input: ClaimInput,
  dueAtTop: SQL,
  groupKey: SQL,
  rate: RateParts,
): { ctes: SQL; limited: boolean; more: SQL } {
  const limit = input.limit;
  const limits = Object.entries(input.groupLimits ?? {})
    .filter(([kind, n]) => input.kinds.includes(kind) && Number.isInteger(n) && n > 0)
    .map(([kind, n]) => ({ kind, n }));
  const limited = limits.length > 0;
  // a group's offer: limit - groups + 1 fills the batch even when all groups but one have a single
  // due job, locking at most about (limit + 1)² / 4 rows. A claim larger than SMALL_CLAIM (a local
  // queue: 500 over 100 groups) offers each group its fair share (limit ÷ groups, rounded up)
  // instead, locking about the rows it takes, not 40,000. A group that gave its whole offer may
  // have more: a claim that came back short then says `more` and the loop claims again at once.
  const offers = sql`groups as materialized (
          select key, n, case when ${limit}::int <= ${sql.raw(String(SMALL_CLAIM))} then ${limit} - total + 1
                 else least(${limit} - total + 1, ceil(${limit}::numeric / total)::int) end as offer
          from (select key, n, count(*) over () as total from walk) w
        ),
        offered as materialized (
          select c.id, c.kind, c.run_after, g.n, g.key${rate.on ? sql`, c.rate_key` : sql``} from groups g cross join lateral (
            select id, kind, run_after${rate.on ? sql`, rate_key` : sql``} from background_jobs
            where ${dueAtTop} and ${groupKey} = g.key
            order by priority, ${groupKey}, run_after
            limit g.offer
            for update skip locked) c
        ),
        ${rate.admission}`;
  // the offered jobs the rate limits let through (all of them without rate-limited kinds)
  const source = rate.on ? sql`admitted` : sql`offered`;
  const take = sql`order by r, n limit greatest(0, ${limit} - (select count(*) from expired))`;
  // r: the job's place in its group's offer (the round); inlined when nothing else reads it
  const rank = sql`row_number() over (partition by o.n order by o.run_after, o.id) as r`;
  if (!limited)
    return {
      limited,
      more: sql``,
      ctes: sql`${offers}
        ranked as (select o.*, ${rank} from ${source} o),
        fair as materialized (select id, null::int as slot, n, r from ranked ${take}),`,
    };
  return {
    limited,
    more: sql`or exists (select 1 from slotted where cap is not null and slot is null) or (select count(*) from fair where slot is not null) > (select count(*) from taken)`,
    ctes: sql`${offers}
        caps as materialized (
          select * from jsonb_to_recordset(${JSON.stringify(limits)}::jsonb) as l(kind text, n int)
        ),
        ranked as materialized (
          select o.*, ${rank},
                 row_number() over (partition by o.kind, o.key order by o.run_after, o.id) as rk,
                 caps.n as cap
          from ${source} o left join caps on caps.kind = o.kind
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
          ${take}
        ),
        taken as (
          insert into job_group_slots (kind, group_key, slot, job_id)
          select kind, key, slot, id from fair where slot is not null
          on conflict do nothing
          returning job_id
        ),`,
  };
}
