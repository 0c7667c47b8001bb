import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformTransaction } from "../../db/operation.ts";
import { AppError } from "../../errors.ts";
import { getJob } from "./get-job.ts";
import { jobAdminActed } from "./job-admin-acted.ts";
import { type JobAdminDeps, type JobRow, type JobView, toJobView } from "./job-view.ts";

/** The range of `background_jobs.priority` an admin (and enqueue) may set. */
export const MAX_JOB_PRIORITY = 32_767;

/**
 * Sets a waiting job's priority (pending, or failed awaiting its retry); the next claims honour it.
 * 404 for an unknown id; 409 when the job is running or finished.
 */
export async function setJobPriority(
  deps: JobAdminDeps,
  ctx: Ctx,
  input: { id: number; priority: number },
): Promise<JobView> {
  const { id, priority } = input;
  if (!Number.isInteger(priority) || Math.abs(priority) > MAX_JOB_PRIORITY)
    throw new AppError("validation_failed", "The priority is not valid.", {
      fields: [{ path: "priority", message: `an integer from -${MAX_JOB_PRIORITY} to ${MAX_JOB_PRIORITY}` }],
    });
  const now = deps.clock.now().toISOString();
  const row = await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const [changed] = await execute<JobRow>(
      tx,
      sql`update background_jobs set priority = ${priority}, updated_at = ${now}::timestamptz
          where id = ${id} and status in ('pending', 'failed')
          returning *`,
    );
    if (changed)
      await jobAdminActed(deps, ctx, {
        action: "set-priority",
        jobId: id,
        count: 1,
        detail: { priority, jobKind: changed.kind },
      });
    return changed;
  });
  if (row) return toJobView(row);
  const existing = await getJob(deps, ctx, { id });
  if (!existing) throw new AppError("not_found", "No job with this id.");
  throw new AppError(
    "conflict",
    `Only a pending or failed job's priority can change; this one is ${existing.status}.`,
  );
}
