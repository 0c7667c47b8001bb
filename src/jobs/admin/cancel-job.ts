import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformTransaction } from "../../db/operation.ts";
import type { JobStatus } from "../../db/schema/jobs.ts";
import { AppError } from "../../errors.ts";
import { JOB_CANCEL_CHANNEL } from "../enqueue.ts";
import { ts } from "../queue.ts";
import { jobAdminActed } from "./job-admin-acted.ts";
import { CANCELLABLE_STATUSES, inList } from "./job-filter.ts";
import { type JobAdminDeps, type JobRow, type JobView, toJobView } from "./job-view.ts";

/**
 * Cancels a job that has not finished: a pending or failed one never runs, a processing one ends
 * `canceled` at once and its handler's signal fires on whichever process runs it (NOTIFY on
 * `plinth_job_cancel`; the next heartbeat otherwise). Its late result is not recorded: every
 * write of a run is fenced on `status = 'processing'`. 404 unknown id, 409 a finished job.
 */
export async function cancelJob(deps: JobAdminDeps, ctx: Ctx, input: { id: number }): Promise<JobView> {
  const now = ts(deps.clock.now());
  const row = await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const [target] = await execute<JobRow & { was: JobStatus }>(
      tx,
      sql`with locked as materialized (
          -- the job and the children the flow trigger cancels with it, in one pass in id order as every
          -- multi-row write of the queue (docs/jobs.md, "Lock order")
          select id from background_jobs
          where id = ${input.id}
             or id = any(array(select child_id from job_dependencies where parent_id = ${input.id} and not resolved))
          order by id
          for update
        ),
        target as materialized (
          select id, status, attempts from background_jobs
          where id = ${input.id} and id = any(array(select id from locked))
          for update
        ),
        changed as (
          update background_jobs j
          set status = 'canceled', finished_at = ${now}, updated_at = ${now}, locked_by = null, locked_until = null
          from target
          where j.id = target.id and target.status in (${inList(CANCELLABLE_STATUSES)})
          returning j.*
        ),
        signalled as (
          select pg_notify(${JOB_CANCEL_CHANNEL}, target.id || ':' || target.attempts)
          from target join changed on changed.id = target.id
          where target.status = 'processing'
        )
        select changed.*, target.status as was, (select count(*) from signalled) as signalled
        from target left join changed on changed.id = target.id`,
    );
    if (target && target.id !== null)
      await jobAdminActed(deps, ctx, {
        action: "cancel",
        jobId: input.id,
        count: 1,
        detail: { jobKind: target.kind },
      });
    return target;
  });
  if (!row) throw new AppError("not_found", "No job with this id.");
  if (row.id === null)
    throw new AppError("conflict", `Only unfinished jobs can be canceled; this one is ${row.was}.`);
  return toJobView(row);
}
