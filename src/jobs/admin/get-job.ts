import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import { type JobAdminDeps, type JobRow, type JobView, toJobView } from "./job-view.ts";

/** One job with the ids of the jobs it depends on (its parents in a flow). */
export interface JobDetail extends JobView {
  dependsOn: number[];
}

/** One job; null for an unknown id. */
export async function getJob(
  deps: Pick<JobAdminDeps, "database">,
  ctx: Ctx,
  input: { id: number },
): Promise<JobDetail | null> {
  const [row] = await withPlatformDatabase(deps, ctx, (db) =>
    execute<JobRow & { depends_on: (string | number)[] | null }>(
      db,
      sql`select j.*, array(select parent_id from job_dependencies where child_id = j.id order by parent_id)
                 as depends_on
          from background_jobs j where j.id = ${input.id}`,
    ),
  );
  return row ? { ...toJobView(row), dependsOn: (row.depends_on ?? []).map(Number) } : null;
}
