import { sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";

/** The job states an operator watches (the finished `succeeded` and `canceled` are left out: they grow). */
export const WATCHED_JOB_STATES = ["pending", "processing", "failed", "dead"] as const;

export interface QueueStats {
  /** Jobs by state and kind. */
  counts: { status: string; kind: string; count: number }[];
  /** Seconds the longest-waiting due job (pending or failed, its run_after passed) has waited, by kind. */
  oldestDue: { kind: string; seconds: number }[];
}

/** What the queue holds now, for the metrics endpoint: two statements on the claim's own indexes. */
export async function queueStats(db: Executor): Promise<QueueStats> {
  const counts = await execute<{ status: string; kind: string; count: string | number }>(
    db,
    sql`select status, kind, count(*) as count from background_jobs
        where status in ('pending', 'processing', 'failed', 'dead') group by status, kind`,
  );
  const oldest = await execute<{ kind: string; seconds: string | number }>(
    db,
    sql`select kind, extract(epoch from (now() - min(run_after))) as seconds from background_jobs
        where status in ('pending', 'failed') and run_after <= now() group by kind`,
  );
  return {
    counts: counts.map((r) => ({ status: r.status, kind: r.kind, count: Number(r.count) })),
    oldestDue: oldest.map((r) => ({ kind: r.kind, seconds: Math.max(0, Number(r.seconds)) })),
  };
}
