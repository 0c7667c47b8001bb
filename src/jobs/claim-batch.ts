import { type SQL, sql } from "drizzle-orm";
import type { BatchCap } from "./registry.ts";

/**
 * Batch kinds in the claim statement: for the jobs of a batch kind it picked (the leaders, each due
 * because it waited its `timeoutMs`: the enqueue sets its `run_after` that far ahead), the same
 * statement takes up to `maxSize - 1` more per leader of the same kind, group and priority
 * (`followers`): pending jobs enqueued within the wait (their `run_after` within `timeoutMs` from
 * now) and failed ones due for their retry, oldest first, skipping rows another claimer holds. The
 * loop runs them as batches of at most `maxSize` (src/jobs/job-runs.ts). Empty without batch kinds.
 */
export function batchParts(input: { caps: BatchCap[]; kinds: string[]; now: SQL }): {
  on: boolean;
  ctes: SQL;
} {
  const caps = input.caps
    .filter((c) => input.kinds.includes(c.kind) && c.maxSize > 1)
    .map((c) => ({ kind: c.kind, size: c.maxSize, wait_ms: c.timeoutMs }));
  if (caps.length === 0) return { on: false, ctes: sql`` };
  const { now } = input;
  const groupKey = sql`coalesce(group_key, '')`;
  return {
    on: true,
    ctes: sql`batch_caps as materialized (
          select * from jsonb_to_recordset(${JSON.stringify(caps)}::jsonb) as b(kind text, size int, wait_ms int)
        ),
        batch_keys as materialized (
          select j.kind, coalesce(j.group_key, '') as key, j.priority, b.size, b.wait_ms, count(*) as leaders
          from picked p join background_jobs j on j.id = p.id join batch_caps b on b.kind = j.kind
          where j.status in ('pending', 'failed')
          group by j.kind, coalesce(j.group_key, ''), j.priority, b.size, b.wait_ms
        ),
        followers as materialized (
          select x.id from batch_keys k cross join lateral (
            select id from background_jobs
            where status in ('pending', 'failed') and priority = k.priority and ${groupKey} = k.key
              and run_after <= ${now} + k.wait_ms * interval '1 millisecond'
              and (status = 'pending' or run_after <= ${now})
              and kind = k.kind and id not in (select id from picked)
            order by priority, ${groupKey}, run_after
            limit k.leaders * (k.size - 1)
            for update skip locked) x
        ),`,
  };
}
