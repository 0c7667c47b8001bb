import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withDatabase } from "../../db/operation.ts";
import { type JobAdminDeps, type JobRow, type JobView, toJobView } from "./job-view.ts";

/** One job; null for an unknown id. */
export async function getJob(
  deps: Pick<JobAdminDeps, "database">,
  ctx: Ctx,
  input: { id: number },
): Promise<JobView | null> {
  const [row] = await withDatabase(deps, ctx, (db) =>
    execute<JobRow>(db, sql`select * from background_jobs where id = ${input.id}`),
  );
  return row ? toJobView(row) : null;
}
