import { sql } from "drizzle-orm";
import { z } from "zod";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import { cursorCodec, type Page, pageOf } from "../../pagination.ts";
import { filterConditions, type JobFilter, whereAll } from "./job-filter.ts";
import { type JobAdminDeps, type JobRow, type JobView, toJobView } from "./job-view.ts";

export interface ListJobsInput extends JobFilter {
  /** 1–200, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

/** The jobs list's position: the page's last (oldest) job id, opaque to clients. */
export const jobCursor = cursorCodec(z.object({ id: z.number().int().positive() }));

/** Jobs newest first, filtered by status, kind, group and creation time, keyset-paginated on id. */
export async function listJobs(
  deps: Pick<JobAdminDeps, "database">,
  ctx: Ctx,
  input: ListJobsInput,
): Promise<Page<JobView>> {
  const limit = Math.min(200, Math.max(1, input.limit ?? 50));
  const before = jobCursor.decodeOptional(input.cursor)?.id;
  const conditions = filterConditions(input);
  if (before !== undefined) conditions.push(sql`id < ${before}`);
  const rows = await withPlatformDatabase(deps, ctx, (db) =>
    execute<JobRow>(
      db,
      sql`select * from background_jobs where ${whereAll(conditions)} order by id desc limit ${limit + 1}`,
    ),
  );
  return pageOf(rows, limit, toJobView, (row) => ({ id: Number(row.id) }), jobCursor);
}
