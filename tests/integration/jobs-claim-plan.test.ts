import { beforeAll, expect, test } from "bun:test";
import { type SQL, sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { execute } from "../../src/db/client.ts";
import { completeAndClaimStatement } from "../../src/jobs/claim.ts";
import { useTestDatabase } from "../helpers/app.ts";

const t = useTestDatabase();

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Total Time"?: number;
  Plans?: PlanNode[];
}

function scans(node: PlanNode, out: PlanNode[] = []): PlanNode[] {
  if (node["Relation Name"] === "background_jobs" && node["Node Type"].includes("Scan")) out.push(node);
  for (const child of node.Plans ?? []) scans(child, out);
  return out;
}

const now = new Date("2030-01-01T00:00:00Z");

beforeAll(async () => {
  await execute(
    t.database.db,
    sql`insert into background_jobs (kind, status, attempts, run_after, created_at, updated_at, finished_at)
        select case when g % 2 = 0 then 'bench.a' else 'bench.b' end,
               case when g % 100 = 0 then 'dead' else 'succeeded' end,
               1, ${now.toISOString()}::timestamptz - interval '1 day', now(), now(), now()
        from generate_series(1, 1000000) g`,
  );
  await execute(
    t.database.db,
    sql`insert into background_jobs (kind, run_after, group_key, priority)
        select 'bench.a', ${now.toISOString()}::timestamptz - (g || ' seconds')::interval,
               case when g % 4 = 0 then null else 'tenant-' || (g % 7) end, case when g % 50 = 0 then 1 else 0 end
        from generate_series(1, 200) g`,
  );
  // rate-limited jobs of a lower priority, due and waiting beyond the rate (the claim reads their
  // next due time through background_jobs_rate_due_idx)
  await execute(
    t.database.db,
    sql`insert into background_jobs (kind, run_after, rate_key, priority)
        select 'bench.a', ${now.toISOString()}::timestamptz + ((g - 50) || ' seconds')::interval, 'api-' || (g % 3), -1
        from generate_series(1, 100) g`,
  );
  await execute(
    t.database.db,
    sql`insert into background_jobs (kind, status, attempts, locked_by, locked_until)
        select 'bench.a', 'processing', 1, 'old', ${now.toISOString()}::timestamptz - interval '1 minute' from generate_series(1, 3)`,
  );
  // the buckets of 10,000 keys (a tenant's each): the claim reads its keys' by primary key
  await execute(
    t.database.db,
    sql`insert into job_rate_limits (rate_key, tat) select 'api-' || g, ${now.toISOString()}::timestamptz from generate_series(0, 9999) g`,
  );
  await execute(t.database.db, sql`analyze background_jobs`);
  await execute(t.database.db, sql`analyze job_rate_limits`);
}, 120_000);

type QueryPlan = { Plan: PlanNode; "Execution Time": number };

/**
 * EXPLAIN ANALYZE of the statement as drizzle sends it (a custom plan for its values), or as the
 * job loop sends it: a prepared statement, which PostgreSQL may switch to a generic plan (forced
 * here) after five runs.
 */
async function planOf(statement: SQL, mode: "custom" | "generic"): Promise<QueryPlan> {
  if (mode === "custom") {
    const [row] = await execute<{ "QUERY PLAN": [QueryPlan] }>(
      t.database.db,
      sql`explain (analyze, format json) ${statement}`,
    );
    if (!row) throw new Error("no plan");
    return row["QUERY PLAN"][0];
  }
  const query = new PgDialect({ casing: "snake_case" }).sqlToQuery(statement);
  return t.database.db.transaction(async (tx) => {
    await execute(tx, sql`set local plan_cache_mode = force_generic_plan`);
    await execute(tx, sql.raw(`prepare claim_plan as ${query.sql}`));
    // EXECUTE takes its arguments as literals (test values only: strings quoted, numbers as they are)
    const literal = (p: unknown) =>
      typeof p === "number" ? String(p) : `'${String(p).replaceAll("'", "''")}'`;
    const [row] = await execute<{ "QUERY PLAN": [QueryPlan] }>(
      tx,
      sql.raw(`explain (analyze, format json) execute claim_plan(${query.params.map(literal).join(", ")})`),
    );
    await execute(tx, sql`deallocate claim_plan`);
    if (!row) throw new Error("no plan");
    return row["QUERY PLAN"][0];
  });
}

const rate = [{ kind: "bench.a", limit: 10, periodSeconds: 1 }];
const batch = [{ kind: "bench.a", maxSize: 10, timeoutMs: 1_000 }];

test.each([
  ["no group limits, custom plan", {}, "custom", [], []],
  ["a groupConcurrency limit, custom plan", { "bench.a": 2 }, "custom", [], []],
  ["no group limits, generic plan", {}, "generic", [], []],
  ["a groupConcurrency limit, generic plan", { "bench.a": 2 }, "generic", [], []],
  ["a rate limit, custom plan", {}, "custom", rate, []],
  ["a rate limit, generic plan", {}, "generic", rate, []],
  ["a batch kind, custom plan", {}, "custom", [], batch],
  ["a batch kind, generic plan", {}, "generic", [], batch],
] as const)(
  "with a million finished jobs the fair claim (%s) reads only index scans and stays fast",
  async (_name, groupLimits, mode, rateLimits, batches) => {
    const statement = completeAndClaimStatement({
      workerId: "w",
      kinds: ["bench.a", "bench.b"],
      limit: 5,
      now,
      complete: [{ id: 1, attempts: 1 }],
      groupLimits,
      groupCursor: "tenant-3",
      rateLimits: [...rateLimits],
      batches: [...batches],
    });
    const plan = await planOf(statement, mode);
    const tableScans = scans(plan.Plan);
    expect(tableScans.length).toBeGreaterThan(0);
    for (const node of tableScans) expect(node["Node Type"]).toMatch(/^Index (Only )?Scan$/);
    const indexes = new Set(tableScans.map((n) => n["Index Name"]));
    // the top priority, the walk over groups and each group's offer: all on the fair index
    expect(indexes.has("background_jobs_fair_idx")).toBe(true);
    expect(indexes.has("background_jobs_lease_idx")).toBe(true);
    if (rateLimits.length > 0) expect(indexes.has("background_jobs_rate_due_idx")).toBe(true);
    expect(JSON.stringify(plan)).not.toContain("Seq Scan");
    // the due scan stops after the limit instead of reading the backlog or the finished rows
    expect(plan["Execution Time"]).toBeLessThan(50);

    // and it did claim, no more than the limit: the 3 expired leases, then the top priority's jobs
    const claimed = await execute<{ priority: number; expired: boolean }>(
      t.database.db,
      sql`select priority, attempts > 1 as expired from background_jobs where locked_by = 'w' and status = 'processing'`,
    );
    // (a batch kind's two picked jobs bring the other due ones of their group and priority along)
    if (batches.length === 0) expect(claimed).toHaveLength(5);
    else expect(claimed.length).toBeGreaterThan(5);
    expect(claimed.filter((c) => c.expired)).toHaveLength(3);
    expect(new Set(claimed.filter((c) => !c.expired).map((c) => c.priority))).toEqual(new Set([1]));
    await execute(
      t.database.db,
      sql`update background_jobs set status = 'pending', locked_by = null, locked_until = null, attempts = 0 where locked_by = 'w' and priority = 1`,
    );
    await execute(
      t.database.db,
      sql`update background_jobs set status = 'processing', locked_by = 'old', attempts = 1, locked_until = ${now.toISOString()}::timestamptz - interval '1 minute' where locked_by = 'w'`,
    );
    await execute(t.database.db, sql`delete from job_group_slots`);
  },
  120_000,
);
