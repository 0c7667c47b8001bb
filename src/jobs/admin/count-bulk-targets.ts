import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import {
  CANCELLABLE_STATUSES,
  checkBulkFilter,
  filterConditions,
  inList,
  type JobFilter,
  RETRYABLE_STATUSES,
  whereAll,
} from "./job-filter.ts";
import type { JobAdminDeps } from "./job-view.ts";

/**
 * How many jobs a bulk action on `filter` would change now: the unfinished ones for a cancel, the
 * dead and canceled ones for a retry (a retry skips a job whose dedup key another unfinished job
 * holds, so it may change fewer). What the console shows before an operator confirms.
 */
export async function countBulkTargets(
  deps: Pick<JobAdminDeps, "database">,
  ctx: Ctx,
  input: { action: "cancel" | "retry"; filter: JobFilter },
): Promise<number> {
  const allowed = input.action === "cancel" ? CANCELLABLE_STATUSES : RETRYABLE_STATUSES;
  checkBulkFilter(input.filter, allowed, input.action);
  const conditions = [...filterConditions(input.filter), sql`status in (${inList(allowed)})`];
  const [row] = await withPlatformDatabase(deps, ctx, (db) =>
    execute<{ count: string | number }>(
      db,
      sql`select count(*) as count from background_jobs where ${whereAll(conditions)}`,
    ),
  );
  return Number(row?.count ?? 0);
}
