import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import type { JobStatus } from "../../db/schema/jobs.ts";
import { type Page, pageOf } from "../../pagination.ts";
import { isUuid } from "../../uuid.ts";
import type { JobDetail } from "./get-job.ts";
import { type JobAdminDeps, type JobRow, toJobView } from "./job-view.ts";
import { jobCursor } from "./list-jobs.ts";

export interface FlowView extends Page<JobDetail> {
  flowId: string;
  /** Jobs of the flow by status (every page: the whole flow). */
  counts: Partial<Record<JobStatus, number>>;
  total: number;
}

/**
 * A flow: its jobs by status, and a page of its jobs in the order they were enqueued (id order),
 * each with the ids it depends on. Null for a flow id with no jobs (never enqueued, or pruned).
 */
export async function getFlow(
  deps: Pick<JobAdminDeps, "database">,
  ctx: Ctx,
  input: { flowId: string; limit?: number; cursor?: string },
): Promise<FlowView | null> {
  if (!isUuid(input.flowId)) return null;
  const limit = Math.min(200, Math.max(1, input.limit ?? 50));
  const after = jobCursor.decodeOptional(input.cursor)?.id ?? 0;
  return withPlatformDatabase(deps, ctx, async (db) => {
    const counts = await execute<{ status: JobStatus; n: number }>(
      db,
      sql`select status, count(*)::int as n from background_jobs where flow_id = ${input.flowId}::uuid group by status`,
    );
    if (counts.length === 0) return null;
    const rows = await execute<JobRow & { depends_on: (string | number)[] | null }>(
      db,
      sql`select j.*, array(select parent_id from job_dependencies where child_id = j.id order by parent_id)
                 as depends_on
          from background_jobs j where j.flow_id = ${input.flowId}::uuid and j.id > ${after}
          order by j.id limit ${limit + 1}`,
    );
    const page = pageOf(
      rows,
      limit,
      (r) => ({ ...toJobView(r), dependsOn: (r.depends_on ?? []).map(Number) }),
      (r) => ({ id: Number(r.id) }),
      jobCursor,
    );
    return {
      flowId: input.flowId,
      counts: Object.fromEntries(counts.map((c) => [c.status, c.n])),
      total: counts.reduce((sum, c) => sum + c.n, 0),
      ...page,
    };
  });
}
