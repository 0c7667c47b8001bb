import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformTransaction } from "../../db/operation.ts";
import { AppError } from "../../errors.ts";
import { JOBS_CHANNEL } from "../enqueue.ts";
import { ts } from "../queue.ts";
import { isUniqueViolation } from "./bulk-batches.ts";
import { getJob } from "./get-job.ts";
import { jobAdminActed } from "./job-admin-acted.ts";
import { inList, RETRYABLE_STATUSES } from "./job-filter.ts";
import { type JobAdminDeps, type JobRow, type JobView, toJobView } from "./job-view.ts";

/**
 * Gives a dead or canceled job a fresh set of attempts, due now (a NOTIFY wakes the loops on
 * commit). 404 for an unknown id; 409 when the job is in another state or another unfinished job
 * now holds its dedup key.
 */
export async function retryDeadJob(deps: JobAdminDeps, ctx: Ctx, input: { id: number }): Promise<JobView> {
  const { id } = input;
  const now = ts(deps.clock.now());
  let row: JobRow | undefined;
  try {
    row = await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
      const [retried] = await execute<JobRow>(
        tx,
        sql`update background_jobs
            set status = case when waiting_on > 0 then 'waiting' else 'pending' end, attempts = 0, run_after = ${now}, finished_at = null,
                locked_by = null, locked_until = null, updated_at = ${now}
            where id = ${id} and status in (${inList(RETRYABLE_STATUSES)})
            returning *`,
      );
      if (!retried) return undefined;
      await jobAdminActed(deps, ctx, {
        action: "retry",
        jobId: id,
        count: 1,
        detail: { jobKind: retried.kind },
      });
      await execute(tx, sql`select pg_notify(${JOBS_CHANNEL}, '')`);
      return retried;
    });
  } catch (error) {
    if (isUniqueViolation(error))
      throw new AppError("conflict", "Another unfinished job holds this job's dedup key.");
    throw error;
  }
  if (row) return toJobView(row);
  const existing = await getJob(deps, ctx, { id });
  if (!existing) throw new AppError("not_found", "No job with this id.");
  throw new AppError(
    "conflict",
    `Only dead or canceled jobs can be retried; this one is ${existing.status}.`,
  );
}
