import { sql } from "drizzle-orm";
import { type Executor, executePrepared } from "../db/client.ts";
import { type DebounceOptions, JOBS_CHANNEL, type Row } from "./enqueue.ts";
import { ts } from "./queue.ts";

/**
 * A debounced enqueue (trailing): one statement that inserts the job due `periodMs` from now, or,
 * while a job with the same debounce key is pending, replaces that job's payload (and its options)
 * and moves its start to `periodMs` from now, never later than `maxWaitMs` after it was first
 * enqueued. The unique index on pending debounce keys makes concurrent enqueues meet on one row;
 * once the job is claimed the key is free, so an enqueue during its run makes one run more.
 */
export async function enqueueDebounced(
  db: Executor,
  now: Date,
  row: Row,
  debounce: DebounceOptions,
): Promise<{ id: number; created: boolean }> {
  const { key, periodMs, maxWaitMs } = debounce;
  if (typeof key !== "string" || key.length === 0) throw new Error("debounce.key must be a non-empty string");
  if (!Number.isInteger(periodMs) || periodMs < 0)
    throw new Error("debounce.periodMs must be an integer ≥ 0");
  if (maxWaitMs !== undefined && (!Number.isInteger(maxWaitMs) || maxWaitMs < periodMs))
    throw new Error("debounce.maxWaitMs must be an integer ≥ periodMs");
  if (row.dedupKey !== null) throw new Error("a job is either debounced or deduplicated, not both");
  const due = new Date(now.getTime() + periodMs);
  const bound = maxWaitMs === undefined ? null : maxWaitMs;
  const [result] = await executePrepared<{ id: string | number; created: boolean; kind: string }>(
    db,
    sql`with upserted as (
        insert into background_jobs as j (kind, payload, run_after, max_attempts, group_key, priority, debounce_key,
          rate_key, created_at, updated_at)
        values (${row.kind}, ${JSON.stringify(row.payload)}::jsonb,
          least(${ts(due)}, ${ts(now)} + ${bound}::int * interval '1 millisecond'),
          ${row.maxAttempts}, ${row.groupKey}, ${row.priority}, ${key}, ${row.rateKey}, ${ts(now)}, ${ts(now)})
        on conflict (debounce_key) where debounce_key is not null and status = 'pending'
        do update set payload = excluded.payload, max_attempts = excluded.max_attempts,
          group_key = excluded.group_key, priority = excluded.priority, rate_key = excluded.rate_key,
          updated_at = excluded.updated_at,
          run_after = least(${ts(due)}, j.created_at + ${bound}::int * interval '1 millisecond')
        where j.kind = excluded.kind
        returning id, xmax = 0 as created, kind, run_after
      ),
      wake as (
        select pg_notify(${JOBS_CHANNEL}, '') from (select 1 from upserted where run_after <= ${ts(now)} limit 1) due
      )
      select id, created, kind, (select count(*) from wake) as notified from upserted`,
  );
  if (!result) throw new Error(`the debounce key "${key}" is held by a pending job of another kind`);
  return { id: Number(result.id), created: result.created === true };
}
