import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import { JOB_CANCEL_CHANNEL } from "../enqueue.ts";
import { ts } from "../queue.ts";
import { BULK_BATCH_SIZE, inBatches } from "./bulk-batches.ts";
import { jobAdminActed } from "./job-admin-acted.ts";
import {
  CANCELLABLE_STATUSES,
  checkBulkFilter,
  filterConditions,
  inList,
  type JobFilter,
  whereAll,
} from "./job-filter.ts";
import type { JobAdminDeps } from "./job-view.ts";

/**
 * Cancels every unfinished job (pending, failed, processing) the filter matches, in batches;
 * running ones are signalled as `cancelJob` does. Returns how many were canceled.
 */
export async function cancelJobs(
  deps: JobAdminDeps,
  ctx: Ctx,
  input: JobFilter,
): Promise<{ changed: number }> {
  checkBulkFilter(input, CANCELLABLE_STATUSES, "cancel");
  const now = ts(deps.clock.now());
  const conditions = [...filterConditions(input), sql`status in (${inList(CANCELLABLE_STATUSES)})`];
  const changed = await withPlatformDatabase(deps, ctx, (db) =>
    inBatches(
      db,
      (after) => sql`with batch as materialized (
          select id, status, attempts from background_jobs
          where ${whereAll(conditions)} and id > ${after}
          order by id limit ${BULK_BATCH_SIZE}
          for update
        ),
        changed as (
          update background_jobs j
          set status = 'canceled', finished_at = ${now}, updated_at = ${now}, locked_by = null, locked_until = null
          from batch where j.id = batch.id
          returning j.id
        ),
        signalled as (
          select pg_notify(${JOB_CANCEL_CHANNEL}, batch.id || ':' || batch.attempts)
          from batch where batch.status = 'processing'
        )
        select (select count(*) from batch)::int as picked, (select count(*) from changed)::int as changed,
               (select max(id) from batch) as last, (select count(*) from signalled)::int as signalled`,
    ),
  );
  await jobAdminActed(deps, ctx, { action: "bulk-cancel", filter: input, count: changed });
  return { changed };
}
