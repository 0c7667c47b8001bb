import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { completeAndClaimStatement } from "../../src/jobs/queue.ts";
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

test("with a million finished jobs the claim reads only index scans and stays fast", async () => {
  const now = new Date("2030-01-01T00:00:00Z");
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
    sql`insert into background_jobs (kind, run_after) select 'bench.a', ${now.toISOString()}::timestamptz - (g || ' seconds')::interval from generate_series(1, 200) g`,
  );
  await execute(
    t.database.db,
    sql`insert into background_jobs (kind, status, attempts, locked_by, locked_until)
        select 'bench.a', 'processing', 1, 'old', ${now.toISOString()}::timestamptz - interval '1 minute' from generate_series(1, 3)`,
  );
  await execute(t.database.db, sql`analyze background_jobs`);

  const statement = completeAndClaimStatement({
    workerId: "w",
    kinds: ["bench.a", "bench.b"],
    limit: 5,
    now,
    complete: [{ id: 1, attempts: 1 }],
  });
  const [row] = await execute<{ "QUERY PLAN": [{ Plan: PlanNode; "Execution Time": number }] }>(
    t.database.db,
    sql`explain (analyze, format json) ${statement}`,
  );
  const plan = row?.["QUERY PLAN"][0];
  if (!plan) throw new Error("no plan");
  const tableScans = scans(plan.Plan);
  expect(tableScans.length).toBeGreaterThan(0);
  for (const node of tableScans) expect(node["Node Type"]).toMatch(/^Index (Only )?Scan$/);
  const indexes = new Set(tableScans.map((n) => n["Index Name"]));
  expect(indexes.has("background_jobs_due_idx")).toBe(true);
  expect(JSON.stringify(plan)).not.toContain("Seq Scan");
  // the due scan stops after the limit instead of reading the backlog or the finished rows
  expect(plan["Execution Time"]).toBeLessThan(50);

  // and it did claim, no more than the limit
  const [claimed] = await execute<{ n: number }>(
    t.database.db,
    sql`select count(*)::int as n from background_jobs where locked_by = 'w' and status = 'processing'`,
  );
  expect(claimed?.n).toBe(5);
}, 120_000);
