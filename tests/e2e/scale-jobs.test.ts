import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { systemClock } from "../../src/clock.ts";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import { servingLockHolders } from "../../src/db/migrator.ts";
import { enqueue, enqueueMany } from "../../src/jobs/enqueue.ts";
import { defineJob } from "../../src/jobs/registry.ts";
import { records, startApi } from "../helpers/api-process.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { REDIS_CLUSTER_URL } from "../helpers/cache.ts";
import { createTestDatabase, databaseUrl, POOLER_URL } from "../helpers/database.ts";
import { waitFor } from "../helpers/jobs.ts";
import { runEntry } from "../helpers/process.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";

// Three job-runner processes (tests/fixtures/job-runner.ts, the real background entry) behind
// PgBouncer in transaction mode (scripts/scaled-services.sh): with DATABASE_DIRECT_URL they are woken
// by NOTIFY over the direct connection; without it they poll and say so once.

const count = defineJob("e2e.count", z.object({ n: z.number() }), () => {});
const ctx = { clock: systemClock };
const children: Child[] = [];

const t = useTestDatabase({ poolSize: 4 });
let pooled = "";
let direct = "";
beforeAll(async () => {
  pooled = databaseUrl(t.name, POOLER_URL);
  direct = databaseUrl(t.name);
  await createRuns(t.database);
});
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.proc.exitCode === null) c.proc.kill("SIGTERM");
    await Promise.race([c.proc.exited, Bun.sleep(10_000)]);
    if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
  }
});

/** A runner over `env`'s database; polls every 30 s unless told otherwise, so NOTIFY is what wakes it. */
async function startRunner(env: Record<string, string>): Promise<Child> {
  const child = spawnBun(["tests/fixtures/job-runner.ts"], {
    Logging__Level: "info",
    Database__PoolSize: "3",
    BackgroundProcessing__JobPollSeconds: "30",
    ...env,
  });
  children.push(child);
  await child.waitForLine((l) => l.includes('"ready":true'), 30_000);
  return child;
}

async function drained(ids: number[]) {
  await waitFor(
    async () => {
      const [r] = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs where id = any(${`{${ids.join(",")}}`}::bigint[]) and status = 'succeeded'`,
      );
      return r?.n === ids.length;
    },
    { timeoutMs: 180_000, intervalMs: 100, what: `all ${ids.length} jobs succeeded` },
  );
}

async function runsOf(ids: number[]) {
  return execute<{ job_id: string; pid: number; attempt: number }>(
    t.database.db,
    sql`select job_id, pid, attempt from e2e_runs where job_id = any(${`{${ids.join(",")}}`}::bigint[])`,
  );
}

/** Ms from enqueue (committed, through `enqueuer`) to the handler's start, the runners idle. */
async function wakeUp(enqueuer: Database, reader: Database, n: number): Promise<number> {
  const before = Date.now();
  const { id } = await enqueue(enqueuer.db, ctx, count, { n });
  const [run] = await waitFor(
    async () => {
      const rows = await execute<{ at: Date }>(reader.db, sql`select at from e2e_runs where job_id = ${id}`);
      return rows.length > 0 ? rows : null;
    },
    { timeoutMs: 20_000, intervalMs: 2, what: `job ${id} to start` },
  );
  return new Date(run?.at ?? 0).getTime() - before;
}

const createRuns = (database: Database) =>
  execute(
    database.db,
    sql`create table e2e_runs (job_id bigint not null, kind text not null, pid int not null, attempt int not null,
        at timestamptz not null default clock_timestamp())`,
  );

const median = (sorted: number[]) => sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;

describe("job runners behind PgBouncer (transaction pooling)", () => {
  test("with DATABASE_DIRECT_URL: three processes drain 10,000 jobs, no duplicate; NOTIFY wake-up within 2x of direct", async () => {
    const env = { DATABASE_URL: pooled, DATABASE_DIRECT_URL: direct, Database__PoolMode: "transaction" };
    const runners = await Promise.all([startRunner(env), startRunner(env), startRunner(env)]);
    for (const runner of runners) expect(runner.stderr()).not.toContain("job loop polls");

    const ids = await enqueueMany(
      t.database.db,
      ctx,
      Array.from({ length: 10_000 }, (_, n) => ({ job: count, payload: { n } })),
    );
    await drained(ids);
    const runs = await runsOf(ids);
    expect(runs).toHaveLength(ids.length);
    expect(new Set(runs.map((r) => r.job_id)).size).toBe(ids.length);
    expect(runs.every((r) => r.attempt === 1)).toBe(true);
    expect(new Set(runs.map((r) => r.pid)).size).toBeGreaterThan(1);

    // NOTIFY wake-up: these runners (enqueued through the pooler too) against three direct runners
    // on a second database (enqueued directly), sampled alternately so both see the same load.
    // The runners poll every 30 s: only NOTIFY wakes them this fast.
    const other = await createTestDatabase();
    const enqueuer = await openDatabase(pooled, { poolSize: 2, poolMode: "transaction" });
    try {
      await createRuns(other.database);
      const directEnv = { DATABASE_URL: databaseUrl(other.name) };
      await Promise.all([startRunner(directEnv), startRunner(directEnv), startRunner(directEnv)]);
      const throughPooler: number[] = [];
      const straight: number[] = [];
      for (let i = 0; i < 30; i++) {
        throughPooler.push(await wakeUp(enqueuer, t.database, i));
        straight.push(await wakeUp(other.database, other.database, i));
      }
      throughPooler.sort((a, b) => a - b);
      straight.sort((a, b) => a - b);
      process.stdout.write(
        `wake-up p50: through PgBouncer ${median(throughPooler)} ms, direct ${median(straight)} ms (30 jobs each, alternating)\n`,
      );
      expect(throughPooler.at(-1) ?? Number.POSITIVE_INFINITY).toBeLessThan(5_000);
      // within 2x of direct; the 5 ms floor absorbs scheduling noise when both are a few ms
      expect(median(throughPooler)).toBeLessThanOrEqual(2 * Math.max(median(straight), 5));
    } finally {
      for (const c of children.splice(0)) {
        c.proc.kill("SIGTERM");
        await c.proc.exited;
      }
      await enqueuer.close();
      await other.drop();
    }
  }, 300_000);

  test("without a direct URL: each process says once that it polls, and they drain by polling", async () => {
    const env = {
      DATABASE_URL: pooled,
      Database__PoolMode: "transaction",
      BackgroundProcessing__JobPollSeconds: "1",
    };
    const runners = await Promise.all([startRunner(env), startRunner(env), startRunner(env)]);
    const polls = (runner: Child) =>
      runner
        .stderr()
        .split("\n")
        .filter((line) => line.includes("job loop polls"));
    // said once, at start (the job loop logs it before "job loop started")
    for (const runner of runners) {
      await waitFor(() => runner.stderr().includes("job loop started"), { what: "the job loop to start" });
      const said = polls(runner);
      expect(said).toHaveLength(1);
      expect(said[0]).toContain("DATABASE_DIRECT_URL");
    }
    const ids = await enqueueMany(
      t.database.db,
      ctx,
      Array.from({ length: 2_000 }, (_, n) => ({ job: count, payload: { n } })),
    );
    await drained(ids);
    const runs = await runsOf(ids);
    expect(runs).toHaveLength(ids.length);
    expect(new Set(runs.map((r) => r.job_id)).size).toBe(ids.length);
    // and never again while it ran (the output kept is its last 20,000 characters)
    for (const runner of runners) expect(polls(runner).length).toBeLessThanOrEqual(1);
  }, 240_000);
});

describe("the API process behind PgBouncer and on a Redis Cluster", () => {
  test("serves: readiness checks the pool, the direct connection and the cluster; the serving lock is held over the direct one", async () => {
    const api = startApi(
      {
        PLINTH_ENVIRONMENT: "Development",
        DATABASE_URL: pooled,
        DATABASE_DIRECT_URL: direct,
        Database__PoolMode: "transaction",
        CACHE_URL: REDIS_CLUSTER_URL,
        BackgroundProcessing__Enabled: "false",
      },
      ["--migrate"],
    ); // the migrator's pass runs over the direct connection, then closes it
    try {
      const port = await api.listening(30_000);
      const listening = records(api.lines).find((r) => r.msg === "listening");
      expect(listening?.database).toMatchObject({ poolMode: "transaction", direct: true });
      expect(listening?.cache).toMatchObject({ cluster: true });
      const body = await waitFor(
        async () => {
          const response = await fetch(`http://127.0.0.1:${port}/api/health/ready`);
          return response.status === 200
            ? ((await response.json()) as { checks: Record<string, unknown> })
            : null;
        },
        { timeoutMs: 15_000, intervalMs: 100, what: "readiness 200" },
      );
      expect(Object.keys(body.checks).sort()).toEqual([
        "cache:responseTime",
        "database-direct:responseTime",
        "database:migrations",
        "database:responseTime",
      ]);
      await waitFor(async () => (await servingLockHolders(t.database.db)) === 1, {
        what: "the serving lock to be held",
      });
    } finally {
      expect(await api.stop()).toBe(0);
    }
    expect(await servingLockHolders(t.database.db)).toBe(0);
  }, 60_000);
});

describe("the migrator beside a transaction pooler", () => {
  test("runs over DATABASE_DIRECT_URL: with the pooled URL unreachable it still reads and applies", async () => {
    const env = {
      PLINTH_ENVIRONMENT: "Development",
      DATABASE_URL: "postgres://postgres@127.0.0.1:1/nowhere",
      DATABASE_DIRECT_URL: direct,
      Database__PoolMode: "transaction",
    };
    const status = await runEntry("src/migrate.ts", ["--status"], env, 60_000);
    expect(status.exitCode).toBe(0);
    const applied = await runEntry("src/migrate.ts", [], env, 60_000);
    expect(applied.exitCode).toBe(0);
    // and without the direct URL it would have used the unreachable pool
    const pooledOnly = await runEntry(
      "src/migrate.ts",
      ["--status"],
      { ...env, DATABASE_DIRECT_URL: undefined },
      60_000,
    );
    expect(pooledOnly.exitCode).toBe(1);
  }, 120_000);
});
