import { afterEach, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { type EnqueueItem, enqueueMany } from "../../src/jobs/enqueue.ts";
import { defineJob } from "../../src/jobs/registry.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";

// the kind tests/fixtures/job-runner.ts runs with groupConcurrency 2 (same name and schema)
const limited = defineJob("e2e.limited", z.object({ ms: z.number() }), () => {});

const children: Child[] = [];
const ctx = { clock: new ManualClock() };
const t = useTestDatabase({ poolSize: 4 });
beforeAll(async () => {
  await execute(
    t.database.db,
    sql`create table e2e_spans (job_id bigint not null, pid int not null, started_at timestamptz not null, ended_at timestamptz)`,
  );
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
});

async function startRunner(): Promise<Child> {
  const child = spawnBun(["tests/fixtures/job-runner.ts"], {
    DATABASE_URL: t.url,
    Logging__Level: "warn",
    Database__PoolSize: "3",
  });
  children.push(child);
  await child.waitForLine((l) => l.includes('"ready":true'));
  return child;
}

test("groupConcurrency 2 holds across three processes: never three runs of one group at once", async () => {
  const runners = await Promise.all([startRunner(), startRunner(), startRunner()]);
  const groups = ["tenant-a", "tenant-b"];
  const items: EnqueueItem[] = Array.from({ length: 60 }, (_, n) => ({
    job: limited,
    payload: { ms: 30 },
    options: { groupKey: groups[n % 2] },
  }));
  await enqueueMany(t.database.db, ctx, items);
  await waitFor(
    async () => {
      const [r] = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs where kind = 'e2e.limited' and status = 'succeeded'`,
      );
      return r?.n === items.length;
    },
    { timeoutMs: 60_000, intervalMs: 50, what: "all 60 limited jobs succeeded" },
  );
  // for every start, the runs of the same group that had started and not ended by then
  const [overlap] = await execute<{ most: number; runs: number; pids: number }>(
    t.database.db,
    sql`select max(concurrent)::int as most, count(*)::int as runs, count(distinct pid)::int as pids from (
          select s.pid, (select count(*) from e2e_spans o join background_jobs oj on oj.id = o.job_id
                         where oj.group_key = j.group_key and o.started_at <= s.started_at
                           and (o.ended_at is null or o.ended_at > s.started_at)) as concurrent
          from e2e_spans s join background_jobs j on j.id = s.job_id) x`,
  );
  expect(overlap?.runs).toBe(items.length);
  expect(overlap?.most).toBe(2); // the limit is reached (the processes did compete) and never passed
  expect(overlap?.pids).toBeGreaterThan(1);
  expect(runners).toHaveLength(3);
}, 120_000);
