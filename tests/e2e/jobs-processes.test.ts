import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { type EnqueueItem, enqueue, enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop, type JobEvent } from "../../src/jobs/job-loop.ts";
import { LEASE_MS } from "../../src/jobs/queue.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";

// the kinds tests/fixtures/job-runner.ts runs (same names and schemas)
const count = defineJob("e2e.count", z.object({ n: z.number() }), () => {});
const slow = defineJob("e2e.slow", z.object({ ms: z.number() }), () => {});
const hang = defineJob("e2e.hang", z.object({}), () => {});

const children: Child[] = [];
const ctx = { clock: new ManualClock() };

const t = useTestDatabase({ poolSize: 4 });
beforeAll(async () => {
  await execute(
    t.database.db,
    sql`create table e2e_runs (job_id bigint not null, kind text not null, pid int not null, attempt int not null)`,
  );
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
});

async function startRunner(settings: Record<string, string> = {}): Promise<Child> {
  const child = spawnBun(["tests/fixtures/job-runner.ts"], {
    DATABASE_URL: t.url,
    Logging__Level: "warn",
    Database__PoolSize: "3",
    ...settings,
  });
  children.push(child);
  await child.waitForLine((l) => l.includes('"ready":true'));
  return child;
}

async function runsOf(kind: string) {
  return execute<{ job_id: string; pid: number; attempt: number }>(
    t.database.db,
    sql`select job_id, pid, attempt from e2e_runs where kind = ${kind}`,
  );
}

describe("job runners in several OS processes", () => {
  test("three processes over 3,000 jobs run every job exactly once", async () => {
    const runners = await Promise.all([startRunner(), startRunner(), startRunner()]);
    const items: EnqueueItem[] = Array.from({ length: 3_000 }, (_, n) => ({ job: count, payload: { n } }));
    const ids = await enqueueMany(t.database.db, ctx, items);
    await waitFor(
      async () => {
        const [r] = await execute<{ n: number }>(
          t.database.db,
          sql`select count(*)::int as n from background_jobs where kind = 'e2e.count' and status = 'succeeded'`,
        );
        return r?.n === ids.length;
      },
      { timeoutMs: 60_000, intervalMs: 50, what: "all 3,000 jobs succeeded" },
    );
    const runs = await runsOf("e2e.count");
    expect(runs).toHaveLength(ids.length);
    expect(new Set(runs.map((r) => r.job_id)).size).toBe(ids.length);
    const pids = new Set(runs.map((r) => r.pid));
    expect(pids.size).toBeGreaterThan(1);
    for (const pid of pids) expect(runners.some((c) => c.proc.pid === pid)).toBe(true);
    const [attempts] = await execute<{ min: number; max: number }>(
      t.database.db,
      sql`select min(attempts)::int as min, max(attempts)::int as max from background_jobs where kind = 'e2e.count'`,
    );
    expect(attempts).toEqual({ min: 1, max: 1 });
  }, 90_000);

  test("a process killed with SIGKILL mid-job: the job runs again after the lease, not before", async () => {
    const victim = await startRunner();
    const { id } = await enqueue(t.database.db, ctx, hang, {});
    await waitFor(async () => (await runsOf("e2e.hang")).some((r) => Number(r.job_id) === id), {
      timeoutMs: 10_000,
      what: "the victim to start the job",
    });
    victim.proc.kill("SIGKILL");
    await victim.proc.exited;
    const left = await jobRow(t.database, id);
    expect(left.status).toBe("processing");
    expect(left.attempts).toBe(1);
    const lockedUntil = left.locked_until as Date;

    // the surviving runner lives in this process with a clock it controls: no five-minute sleep
    const clock = new ManualClock(new Date(lockedUntil.getTime() - LEASE_MS + 1_000));
    const started: number[] = [];
    const claims: JobEvent[] = [];
    const redactor = createRedactor([]);
    const survivor = createJobLoop(
      {
        database: t.database,
        clock,
        logger: createLogger({ level: "error", redactor, write: () => {} }),
        redactor,
      },
      {
        registry: createJobRegistry([
          defineJob("e2e.hang", z.object({}), (_p, c) => {
            started.push(c.attempt);
          }),
        ]),
        parallelism: 4,
        batchSize: 5,
        pollMs: 60_000,
        listen: false,
        onEvent: (e) => e.type === "claimed" && claims.push(e),
      },
    );
    await survivor.start();
    await waitFor(() => claims.length === 1, { what: "first claim" });
    clock.set(lockedUntil.getTime() - 1);
    survivor.wake();
    await waitFor(() => claims.length === 2, { what: "claim just before the lease ends" });
    clock.set(lockedUntil.getTime());
    survivor.wake();
    await waitFor(() => claims.length === 3, { what: "claim at the lease end" });
    expect(started).toEqual([]);
    expect((await jobRow(t.database, id)).attempts).toBe(1);

    clock.set(lockedUntil.getTime() + 1);
    survivor.wake();
    await waitFor(async () => (await jobRow(t.database, id)).status === "succeeded", { what: "takeover" });
    expect(started).toEqual([2]);
    expect((await jobRow(t.database, id)).attempts).toBe(2);
    await survivor.stop(1_000);
  }, 30_000);

  test("SIGTERM: running jobs finish within the shutdown timeout, the rest are released at once", async () => {
    const runner = await startRunner({ Server__ShutdownTimeoutSeconds: "1" });
    const { id: quickId } = await enqueue(t.database.db, ctx, slow, { ms: 200 });
    const { id: stuckId } = await enqueue(t.database.db, ctx, hang, {});
    await waitFor(
      async () => {
        const runs = await execute<{ job_id: string }>(
          t.database.db,
          sql`select job_id from e2e_runs where job_id in (${quickId}, ${stuckId})`,
        );
        return runs.length === 2;
      },
      { what: "both jobs to start" },
    );
    const stopAt = performance.now();
    runner.proc.kill("SIGTERM");
    expect(await runner.proc.exited).toBe(0);
    const tookMs = performance.now() - stopAt;
    expect(tookMs).toBeGreaterThan(900); // waited for the stuck job up to the timeout
    expect(tookMs).toBeLessThan(5_000);
    expect(await jobRow(t.database, quickId)).toMatchObject({ status: "succeeded", attempts: 1 });
    expect(await jobRow(t.database, stuckId)).toMatchObject({
      status: "pending",
      attempts: 0,
      locked_by: null,
      locked_until: null,
    });

    // another process takes it immediately, not after five minutes
    const next = await startRunner();
    await waitFor(
      async () =>
        (await runsOf("e2e.hang")).filter((r) => Number(r.job_id) === stuckId && r.pid === next.proc.pid)
          .length === 1,
      { what: "the released job to start elsewhere" },
    );
    expect((await jobRow(t.database, stuckId)).attempts).toBe(1);
  }, 30_000);
});
