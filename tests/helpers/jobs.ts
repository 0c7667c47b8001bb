import { sql } from "drizzle-orm";
import { type Database, execute } from "../../src/db/client.ts";
import type { JobStatus } from "../../src/db/schema/jobs.ts";

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (no fixed sleeps in tests). */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 10_000, intervalMs = 10, what = "condition" } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(intervalMs);
  }
}

export interface JobRowForTest {
  id: number;
  kind: string;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  locked_by: string | null;
  locked_until: Date | null;
  run_after: Date;
  last_error: string | null;
  finished_at: Date | null;
}

export async function jobRow(database: Database, id: number): Promise<JobRowForTest> {
  const [row] = await execute<JobRowForTest>(
    database.db,
    sql`select id::int as id, kind, status, attempts, max_attempts, locked_by, locked_until, run_after, last_error, finished_at
        from background_jobs where id = ${id}`,
  );
  if (!row) throw new Error(`job ${id} not found`);
  const date = (v: unknown) => (v === null ? null : new Date(v as string));
  return {
    ...row,
    locked_until: date(row.locked_until),
    run_after: new Date(row.run_after),
    finished_at: date(row.finished_at),
  };
}

export async function countByStatus(database: Database): Promise<Record<string, number>> {
  const rows = await execute<{ status: string; n: number }>(
    database.db,
    sql`select status, count(*)::int as n from background_jobs group by status`,
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}
