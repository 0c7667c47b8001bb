import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import { JOBS_CHANNEL } from "../enqueue.ts";
import { ts } from "../queue.ts";
import { BULK_BATCH_SIZE, inBatches } from "./bulk-batches.ts";
import { jobAdminActed } from "./job-admin-acted.ts";
import {
  checkBulkFilter,
  filterConditions,
  inList,
  type JobFilter,
  RETRYABLE_STATUSES,
  whereAll,
} from "./job-filter.ts";
import type { JobAdminDeps } from "./job-view.ts";

/**
 * Retries every dead or canceled job the filter matches, in batches: fresh attempts, due now.
 * A job whose dedup key another unfinished job holds stays as it is (of several holding one key,
 * the newest is retried). Returns how many were retried.
 */
export async function retryJobs(
  deps: JobAdminDeps,
  ctx: Ctx,
  input: JobFilter,
): Promise<{ changed: number }> {
  checkBulkFilter(input, RETRYABLE_STATUSES, "retry");
  const now = ts(deps.clock.now());
  const conditions = [...filterConditions(input), sql`status in (${inList(RETRYABLE_STATUSES)})`];
  const changed = await withPlatformDatabase(deps, ctx, (db) =>
    inBatches(
      db,
      (after) => sql`with batch as materialized (
          select id, dedup_key from background_jobs
          where ${whereAll(conditions)} and id > ${after}
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
          set status = case when j.waiting_on > 0 then 'waiting' else 'pending' end, attempts = 0,
              run_after = ${now}, finished_at = null,
              locked_by = null, locked_until = null, updated_at = ${now}
          from eligible where j.id = eligible.id
          returning j.id
        ),
        wake as (select pg_notify(${JOBS_CHANNEL}, '') from (select 1 from changed limit 1) one)
        select (select count(*) from batch)::int as picked, (select count(*) from changed)::int as changed,
               (select max(id) from batch) as last, (select count(*) from wake)::int as woken`,
    ),
  );
  await jobAdminActed(deps, ctx, { action: "bulk-retry", filter: input, count: changed });
  return { changed };
}
