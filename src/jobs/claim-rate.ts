import { type SQL, sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";
import { ts } from "./queue.ts";
import type { RateCap } from "./registry.ts";

/** The most due jobs of one key one claim pushes beyond the rate (a larger backlog takes more claims). */
export const RATE_PUSH_LIMIT = 1_000;
/** Rounding slack of the bucket check, in ms (times are microseconds, a token's spacing a fraction). */
const SLACK_MS = 1;

/** The parts of the claim statement that enforce `rateLimit` (empty when no claimed kind has one). */
export interface RateParts {
  /** Whether any claimed kind is rate limited. */
  on: boolean;
  /** CTEs after `offered`: the buckets of its keys, locked, and `admitted` (offered minus refused). */
  admission: SQL;
  /** CTEs after `picked`: the tokens taken, and the refused keys' due jobs pushed beyond the rate. */
  settle: SQL;
  /** `or …` terms of the meta row's `more`. */
  more: SQL;
  /** The next time a rate-limited job of these kinds is due (null: none waits). */
  nextAt: SQL;
}

/**
 * Rate limits per key in the claim statement. Each key has a GCRA bucket in `job_rate_limits`:
 * `tat` (theoretical arrival time); a run of a kind with limit L per period P costs T = P / L and is
 * allowed while max(tat, now) + the cost of this claim's runs of the key so far ≤ now + P (a bucket
 * of L tokens refilled at L per P). The claim locks the buckets of the keys it was offered
 * (`for update skip locked`: a bucket another claimer holds is left alone this time, and the claim
 * says `more`), takes tokens for what it claims, and moves the due jobs of a key it refused out of
 * the way: their `run_after` is spread one token apart from the key's `next_at` (or the next
 * token), so they wait without being offered and refused again (no busy loop) and other keys'
 * jobs behind them in their group are reached at once. `nextAt` tells the loop when to wake for
 * the next one instead of waiting for its poll.
 */
export function rateParts(input: { caps: RateCap[]; kinds: string[]; now: SQL; kindList: SQL }): RateParts {
  const caps = input.caps
    .filter((c) => input.kinds.includes(c.kind))
    .map((c) => ({ kind: c.kind, t_ms: (c.periodSeconds * 1000) / c.limit, p_ms: c.periodSeconds * 1000 }));
  if (caps.length === 0)
    return { on: false, admission: sql``, settle: sql``, more: sql``, nextAt: sql`null` };
  const { now, kindList } = input;
  const ms = sql`interval '1 millisecond'`;
  const admission = sql`rate_caps as materialized (
          select * from jsonb_to_recordset(${JSON.stringify(caps)}::jsonb) as c(kind text, t_ms float8, p_ms float8)
        ),
        rate_cand as materialized (
          select o.id, o.run_after, o.rate_key, c.t_ms, c.p_ms
          from offered o join rate_caps c on c.kind = o.kind
          where o.rate_key is not null
        ),
        rate_state as materialized (
          select rate_key, tat, next_at from job_rate_limits
          where rate_key in (select rate_key from rate_cand)
          order by rate_key
          for update skip locked
        ),
        -- a key without a bucket gets one (its jobs wait for the next claim, which says more); in key
        -- order, so two claims inserting the same new keys wait for each other in one order only
        rate_missing as (
          insert into job_rate_limits (rate_key)
          select distinct c.rate_key from rate_cand c
          where not exists (select 1 from rate_state s where s.rate_key = c.rate_key)
          order by c.rate_key
          on conflict do nothing
        ),
        rate_cost as materialized (
          select c.id, c.rate_key, c.t_ms, c.p_ms,
            case when s.rate_key is null then null
                 else greatest(s.tat, ${now})
                      + sum(c.t_ms) over (partition by c.rate_key order by c.run_after, c.id) * ${ms}
                      <= ${now} + (c.p_ms + ${SLACK_MS}) * ${ms} end as ok
          from rate_cand c left join rate_state s on s.rate_key = c.rate_key
        ),
        admitted as materialized (
          select o.* from offered o
          where not exists (select 1 from rate_cost r where r.id = o.id and r.ok is not true)
        ),`;
  const settle = sql`rate_taken as materialized (
          select c.rate_key, sum(c.t_ms) as cost from picked p join rate_cost c on c.id = p.id group by c.rate_key
        ),
        rate_push_keys as materialized (
          select rate_key, max(t_ms) as t_ms, min(p_ms) as p_ms from rate_cost where ok = false group by rate_key
        ),
        rate_push as materialized (
          select k.rate_key, x.id, row_number() over (partition by k.rate_key order by x.run_after, x.id) as i
          from rate_push_keys k cross join lateral (
            select id, run_after from background_jobs
            where rate_key = k.rate_key and status in ('pending', 'failed') and run_after <= ${now}
              and kind in (${kindList}) and id not in (select id from picked)
            order by run_after
            limit ${RATE_PUSH_LIMIT}
            for update skip locked) x
        ),
        rate_start as materialized (
          select k.rate_key, k.t_ms, (select count(*) from rate_push p where p.rate_key = k.rate_key) as m,
            greatest(s.next_at, greatest(s.tat, ${now}) + (coalesce(t.cost, 0) + k.t_ms - k.p_ms) * ${ms}) as start
          from rate_push_keys k join rate_state s on s.rate_key = k.rate_key
            left join rate_taken t on t.rate_key = k.rate_key
        ),
        rate_pushed as (
          update background_jobs j set run_after = s.start + (p.i - 1) * s.t_ms * ${ms}, updated_at = ${now}
          from rate_push p join rate_start s on s.rate_key = p.rate_key
          where j.id = p.id
        ),
        rate_settled as (
          update job_rate_limits r
          set tat = case when t.cost is null then r.tat else greatest(r.tat, ${now}) + t.cost * ${ms} end,
              next_at = case when coalesce(s.m, 0) = 0 then r.next_at else s.start + s.m * s.t_ms * ${ms} end
          from (select rate_key from rate_taken union select rate_key from rate_start) u
            left join rate_taken t on t.rate_key = u.rate_key
            left join rate_start s on s.rate_key = u.rate_key
          where r.rate_key = u.rate_key
        ),`;
  const more = sql`or exists (select 1 from rate_cand c where not exists (select 1 from rate_state s where s.rate_key = c.rate_key))
          or exists (select 1 from rate_start where m >= ${RATE_PUSH_LIMIT})`;
  // this statement's own pushes are not in its snapshot: the earliest of them counts too
  const nextAt = sql`least(
            (select run_after from background_jobs
             where rate_key is not null and status in ('pending', 'failed') and run_after > ${now} and kind in (${kindList})
             order by run_after limit 1),
            (select min(start) from rate_start where m > 0 and start > ${now}))`;
  return { on: true, admission, settle, more, nextAt };
}

/**
 * Deletes the buckets of keys idle since `before`: a bucket whose `tat` and `next_at` are past is
 * full and spreads nothing, the same as no bucket (the claim makes one again when it needs it).
 */
export async function pruneRateBuckets(db: Executor, before: Date): Promise<number> {
  const rows = await execute<{ rate_key: string }>(
    db,
    sql`delete from job_rate_limits where tat < ${ts(before)} and next_at < ${ts(before)} returning rate_key`,
  );
  return rows.length;
}
