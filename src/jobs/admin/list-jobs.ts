import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withDatabase } from "../../db/operation.ts";
import { AppError } from "../../errors.ts";
import { type CursorCodec, type Page, pageOf } from "../../pagination.ts";
import { filterConditions, type JobFilter, whereAll } from "./job-filter.ts";
import { type JobAdminDeps, type JobRow, type JobView, toJobView } from "./job-view.ts";

export interface ListJobsInput extends JobFilter {
  /** 1–200, default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

const ID = /^\d{1,18}$/;
const decode = (cursor: string): number => {
  if (!ID.test(cursor))
    throw new AppError("validation_failed", "The cursor is not valid.", {
      fields: [{ path: "cursor", message: "not a cursor returned by this endpoint" }],
    });
  return Number(cursor);
};
/** The jobs list's cursor is the last job's id as it is (a public contract: clients keep them). */
const idCursor: CursorCodec<number> = {
  encode: (id) => String(id),
  decode,
  decodeOptional: (cursor) => (cursor === undefined ? undefined : decode(cursor)),
};

/** Jobs newest first, filtered by status, kind, group and creation time, keyset-paginated on id. */
export async function listJobs(
  deps: Pick<JobAdminDeps, "database">,
  ctx: Ctx,
  input: ListJobsInput,
): Promise<Page<JobView>> {
  const limit = Math.min(200, Math.max(1, input.limit ?? 50));
  const before = idCursor.decodeOptional(input.cursor);
  const conditions = filterConditions(input);
  if (before !== undefined) conditions.push(sql`id < ${before}`);
  const rows = await withDatabase(deps, ctx, (db) =>
    execute<JobRow>(
      db,
      sql`select * from background_jobs where ${whereAll(conditions)} order by id desc limit ${limit + 1}`,
    ),
  );
  return pageOf(rows, limit, toJobView, (row) => Number(row.id), idCursor);
}
