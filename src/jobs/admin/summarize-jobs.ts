import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import type { JobAdminDeps } from "./job-view.ts";

/** Open jobs (not finished) by state and kind, for the console's overview. */
export interface JobSummary {
  /** Counts of jobs in each open state (pending, processing, failed, dead). */
  byStatus: Record<string, number>;
  /** Open jobs per kind and state, most first. */
  byKind: { kind: string; status: string; count: number }[];
}

/**
 * Counts of open jobs (pending, processing, failed, dead) by state and by kind. Finished states
 * (succeeded, canceled) are counted over the last hour by `jobActivity` instead: the table keeps
 * finished rows for days, and counting them all would read the whole table on every view.
 */
export async function summarizeJobs(deps: Pick<JobAdminDeps, "database">, ctx: Ctx): Promise<JobSummary> {
  const rows = await withPlatformDatabase(deps, ctx, (db) =>
    execute<{ kind: string; status: string; count: string | number }>(
      db,
      sql`select kind, status, count(*) as count from background_jobs
          where status in ('pending', 'processing', 'failed', 'dead')
          group by kind, status order by count(*) desc, kind, status`,
    ),
  );
  const byStatus: Record<string, number> = { pending: 0, processing: 0, failed: 0, dead: 0 };
  const byKind = rows.map((r) => ({ kind: r.kind, status: r.status, count: Number(r.count) }));
  for (const r of byKind) byStatus[r.status] = (byStatus[r.status] ?? 0) + r.count;
  return { byStatus, byKind };
}
