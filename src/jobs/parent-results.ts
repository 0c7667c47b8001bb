import { sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";

/**
 * The results of job `id`'s parents (`context.parentResults()`), keyed by each parent's flow key,
 * or its id as text when it has none. Read when the handler asks, never by the claim.
 */
export async function parentResults(db: Executor, input: { id: number }): Promise<Record<string, unknown>> {
  const rows = await execute<{ id: string | number; flow_key: string | null; result: unknown }>(
    db,
    sql`select p.id, p.flow_key, p.result from job_dependencies d
        join background_jobs p on p.id = d.parent_id
        where d.child_id = ${input.id}`,
  );
  const out: Record<string, unknown> = {};
  for (const r of rows) out[r.flow_key ?? String(r.id)] = r.result ?? null;
  return out;
}
