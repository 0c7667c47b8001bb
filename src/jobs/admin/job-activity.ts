import { sql } from "drizzle-orm";
import type { Ctx } from "../../context.ts";
import { execute } from "../../db/client.ts";
import { withPlatformDatabase } from "../../db/operation.ts";
import type { JobAdminDeps } from "./job-view.ts";

/** One minute of job activity: runs that succeeded, and failed attempts (retrying or dead). */
export interface JobActivityMinute {
  /** Start of the minute. */
  at: string;
  succeeded: number;
  failed: number;
}

/**
 * Throughput and failures per minute over the last `minutes` (default 60), oldest first, every
 * minute present: succeeded runs by their finish time; failures are jobs that went dead in the
 * minute, and jobs waiting for a retry whose last attempt failed in it (a job that failed several
 * times counts at its latest failure).
 */
export async function jobActivity(
  deps: Pick<JobAdminDeps, "database" | "clock">,
  ctx: Ctx,
  input: { minutes?: number } = {},
): Promise<JobActivityMinute[]> {
  const minutes = Math.min(24 * 60, Math.max(1, input.minutes ?? 60));
  const now = deps.clock.now();
  const end = new Date(Math.floor(now.getTime() / 60_000) * 60_000 + 60_000);
  const start = new Date(end.getTime() - minutes * 60_000);
  type MinuteRow = { minute: string | Date; succeeded: string | number; failed: string | number };
  const rows = await withPlatformDatabase(deps, ctx, (db) =>
    execute<MinuteRow>(
      db,
      sql`select date_trunc('minute', at) as minute,
               count(*) filter (where outcome = 'succeeded') as succeeded,
               count(*) filter (where outcome = 'failed') as failed
        from (
          select finished_at as at, case when status = 'succeeded' then 'succeeded' else 'failed' end as outcome
          from background_jobs
          where finished_at >= ${start.toISOString()}::timestamptz and finished_at < ${end.toISOString()}::timestamptz
            and status in ('succeeded', 'dead')
          union all
          select updated_at, 'failed' from background_jobs
          where status = 'failed' and updated_at >= ${start.toISOString()}::timestamptz
            and updated_at < ${end.toISOString()}::timestamptz
        ) runs
        group by 1`,
    ),
  );
  const byMinute = new Map(rows.map((r) => [new Date(r.minute).getTime(), r]));
  const out: JobActivityMinute[] = [];
  for (let t = start.getTime(); t < end.getTime(); t += 60_000) {
    const r = byMinute.get(t);
    out.push({
      at: new Date(t).toISOString(),
      succeeded: Number(r?.succeeded ?? 0),
      failed: Number(r?.failed ?? 0),
    });
  }
  return out;
}
