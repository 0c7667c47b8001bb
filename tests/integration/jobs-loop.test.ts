import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { type Database, execute } from "../../src/db/client.ts";
import { enqueue, enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop, type JobEvent, type JobLoop, type JobLoopOptions } from "../../src/jobs/job-loop.ts";
import { LEASE_MS } from "../../src/jobs/queue.ts";
import { createJobRegistry, defineJob, type JobDefinition } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/database.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";

const started: JobLoop[] = [];
const opened: Database[] = [];
const SECRET = "sk_live_job_secret_value_123";
const redactor = createRedactor([SECRET]);

afterAll(async () => {
  await Promise.allSettled(started.map((l) => l.stop(1_000)));
  await Promise.allSettled(opened.map((d) => d.close()));
});
const t = useTestDatabase({ poolSize: 8 });

function loop(
  definitions: JobDefinition[],
  options: Partial<JobLoopOptions> & { clock?: ManualClock; database?: Database } = {},
): JobLoop {
  const { clock, database, ...rest } = options;
  const l = createJobLoop(
    {
      database: database ?? t.database,
      clock: clock ?? new ManualClock(),
      logger: createLogger({ level: "error", redactor, write: () => {} }),
      redactor,
    },
    { registry: createJobRegistry(definitions), parallelism: 4, batchSize: 5, pollMs: 2_000, ...rest },
  );
  started.push(l);
  return l;
}

const enqueueCtx = (clock: ManualClock) => ({ clock });

describe("job loop", () => {
  test("several runners over thousands of jobs run every job exactly once", async () => {
    const runs = new Map<number, number>();
    const job = defineJob("loop.many", z.object({ n: z.number() }), async (_p, c) => {
      runs.set(c.id, (runs.get(c.id) ?? 0) + 1);
      if (c.id % 7 === 0) await Bun.sleep(1); // some jobs yield so runners interleave
    });
    const clock = new ManualClock();
    const ids = await enqueueMany(
      t.database.db,
      enqueueCtx(clock),
      Array.from({ length: 4_000 }, (_, n) => ({ job, payload: { n } })),
    );
    const loops: JobLoop[] = [];
    for (let i = 0; i < 4; i++) {
      const database = await openTestDatabase(t.url, { poolSize: 3 });
      opened.push(database);
      loops.push(loop([job], { clock, database, workerId: `runner-${i}` }));
    }
    await Promise.all(loops.map((l) => l.start()));
    await waitFor(() => runs.size === ids.length, { timeoutMs: 30_000, what: "all jobs to run" });
    await waitFor(
      async () => {
        const [r] = await execute<{ n: number }>(
          t.database.db,
          sql`select count(*)::int as n from background_jobs where kind = ${job.kind} and status = 'succeeded'`,
        );
        return r?.n === ids.length;
      },
      { what: "all jobs recorded" },
    );
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    const [summary] = await execute<{ max: number; min: number; workers: number }>(
      t.database.db,
      sql`select max(attempts)::int as max, min(attempts)::int as min, count(distinct locked_by)::int as workers
          from background_jobs where kind = ${job.kind}`,
    );
    expect(summary).toMatchObject({ max: 1, min: 1 });
    await Promise.all(loops.map((l) => l.stop(1_000)));
  }, 60_000);

  test("a backlog drains at full speed with the default settings, not one batch per poll", async () => {
    let count = 0;
    const job = defineJob("loop.backlog", z.object({}), () => {
      count++;
    });
    const clock = new ManualClock();
    await enqueueMany(
      t.database.db,
      enqueueCtx(clock),
      Array.from({ length: 1_000 }, () => ({ job, payload: {} })),
    );
    const claims: number[] = [];
    const l = loop([job], {
      clock,
      listen: false,
      onEvent: (e) => {
        if (e.type === "claimed") claims.push(e.requested);
      },
    });
    const begin = performance.now();
    await l.start();
    // polling alone (5 jobs per 2 s poll) would need 400 s
    await waitFor(() => count === 1_000, { timeoutMs: 15_000, what: "backlog drained" });
    expect(performance.now() - begin).toBeLessThan(15_000);
    expect(Math.max(...claims)).toBeLessThanOrEqual(4); // min(batch 5, 4 free slots)
    await l.stop(1_000);
  });

  test("NOTIFY on enqueue wakes an idle loop within milliseconds", async () => {
    const startedAt: number[] = [];
    const job = defineJob("loop.notify", z.object({}), () => {
      startedAt.push(performance.now());
    });
    const clock = new ManualClock();
    const claims: JobEvent[] = [];
    const l = loop([job], { clock, pollMs: 60_000, onEvent: (e) => e.type === "claimed" && claims.push(e) });
    await l.start();
    expect(l.listening).toBe(true);
    await waitFor(() => claims.length >= 1, { what: "the first (empty) poll" });
    const latencies: number[] = [];
    for (let i = 0; i < 5; i++) {
      const before = performance.now();
      await enqueue(t.database.db, enqueueCtx(clock), job, {});
      await waitFor(() => startedAt.length === i + 1, { timeoutMs: 2_000, intervalMs: 1, what: "job start" });
      latencies.push((startedAt[i] as number) - before);
    }
    expect(Math.max(...latencies)).toBeLessThan(500);
    await l.stop(1_000);
  });

  test("without LISTEN the loop still works by polling", async () => {
    let ran = 0;
    const job = defineJob("loop.nolisten", z.object({}), () => {
      ran++;
    });
    const clock = new ManualClock();
    const broken: Database = {
      ...t.database,
      listen: () => Promise.reject(new Error("LISTEN is not supported by this pooler")),
    };
    const l = loop([job], { clock, database: broken, pollMs: 100 });
    await l.start();
    expect(l.listening).toBe(false);
    await enqueue(t.database.db, enqueueCtx(clock), job, {});
    await waitFor(() => ran === 1, { timeoutMs: 3_000, what: "polled job" });
    await l.stop(1_000);
  });

  test("claims only kinds it has handlers for", async () => {
    const clock = new ManualClock();
    const known = defineJob("loop.known", z.object({}), () => {});
    const unknown = defineJob("loop.unknown", z.object({}), () => {});
    const { id: unknownId } = await enqueue(t.database.db, enqueueCtx(clock), unknown, {});
    const { id: knownId } = await enqueue(t.database.db, enqueueCtx(clock), known, {});
    const l = loop([known], { clock });
    await l.start();
    await waitFor(async () => (await jobRow(t.database, knownId)).status === "succeeded");
    expect(await jobRow(t.database, unknownId)).toMatchObject({ status: "pending", attempts: 0 });
    await l.stop(1_000);
  });

  test("retries with backoff on the clock, records redacted bounded errors, and ends dead", async () => {
    const clock = new ManualClock("2030-06-01T00:00:00Z");
    const attempts: number[] = [];
    const job = defineJob("loop.flaky", z.object({}), (_p, c) => {
      attempts.push(c.attempt);
      throw new Error(`upstream said no to ${SECRET} ${"x".repeat(5_000)}`);
    });
    const events: JobEvent[] = [];
    const { id } = await enqueue(t.database.db, enqueueCtx(clock), job, {}, { maxAttempts: 3 });
    const l = loop([job], {
      clock,
      random: () => 0.5,
      retry: { baseMs: 10_000, maxMs: 15_000, jitter: 0.2 },
      onEvent: (e) => events.push(e),
    });
    await l.start();
    await waitFor(async () => (await jobRow(t.database, id)).status === "failed", { what: "first failure" });
    let row = await jobRow(t.database, id);
    expect(row.attempts).toBe(1);
    expect(row.run_after.getTime()).toBe(clock.now().getTime() + 10_000);
    expect(row.last_error).toContain("upstream said no to [REDACTED]");
    expect(row.last_error).not.toContain(SECRET);
    expect(row.last_error?.length).toBeLessThanOrEqual(2_000);

    // not due yet: a wake claims nothing
    l.wake();
    await waitFor(() => events.filter((e) => e.type === "claimed").length >= 2);
    expect(attempts).toEqual([1]);

    clock.advance(10_000);
    l.wake();
    await waitFor(
      async () =>
        (await jobRow(t.database, id)).attempts === 2 && (await jobRow(t.database, id)).status === "failed",
    );
    row = await jobRow(t.database, id);
    // 10 s × 2 = 20 s, capped at 15 s
    expect(row.run_after.getTime()).toBe(clock.now().getTime() + 15_000);

    clock.advance(15_000);
    l.wake();
    await waitFor(async () => (await jobRow(t.database, id)).status === "dead", { what: "dead" });
    row = await jobRow(t.database, id);
    expect(row).toMatchObject({ attempts: 3, locked_by: null });
    expect(row.finished_at?.getTime()).toBe(clock.now().getTime());
    expect(attempts).toEqual([1, 2, 3]);
    expect(events.some((e) => e.type === "dead" && e.id === id)).toBe(true);
    await l.stop(1_000);
  });

  test("a payload that fails its schema goes straight to dead with the reason", async () => {
    const clock = new ManualClock();
    let ran = 0;
    const job = defineJob("loop.strict", z.object({ userId: z.uuid() }), () => {
      ran++;
    });
    const [row] = await execute<{ id: number }>(
      t.database.db,
      sql`insert into background_jobs (kind, payload, run_after) values (${job.kind}, '{"userId": 42}', ${clock.now().toISOString()}::timestamptz) returning id::int as id`,
    );
    const l = loop([job], { clock });
    await l.start();
    const id = row?.id as number;
    await waitFor(async () => (await jobRow(t.database, id)).status === "dead", { what: "dead" });
    const dead = await jobRow(t.database, id);
    expect(dead.attempts).toBe(1);
    expect(dead.last_error).toContain('payload does not match the schema of job kind "loop.strict"');
    expect(dead.last_error).toContain("userId");
    expect(ran).toBe(0);
    await l.stop(1_000);
  });

  test("without heartbeats getting through, the handler's signal fires before the lease ends", async () => {
    const clock = new ManualClock();
    let abortedAfter = -1;
    const job = defineJob("loop.slow", z.object({}), async (_p, c) => {
      const begin = performance.now();
      await new Promise<void>((resolve) => c.signal.addEventListener("abort", () => resolve()));
      abortedAfter = performance.now() - begin;
      throw c.signal.reason;
    });
    const { id } = await enqueue(t.database.db, enqueueCtx(clock), job, {});
    const l = loop([job], { clock, leaseMs: 600, heartbeatMs: 0 });
    await l.start();
    await waitFor(async () => (await jobRow(t.database, id)).status === "failed", { what: "aborted run" });
    expect(abortedAfter).toBeGreaterThan(400);
    expect(abortedAfter).toBeLessThan(600);
    expect((await jobRow(t.database, id)).last_error).toContain("lease is about to end");
    await l.stop(1_000);
  });

  test("with heartbeats a run outlives its lease: renewed every third of it, never aborted", async () => {
    const clock = new ManualClock();
    const leases: number[] = [];
    let aborted = false;
    const job = defineJob("loop.heartbeat", z.object({}), async (_p, c) => {
      c.signal.addEventListener("abort", () => (aborted = true));
      // runs until the lease was renewed three times, the clock moving a lease meanwhile
      await waitFor(
        async () => {
          const until = (await jobRow(t.database, c.id)).locked_until?.getTime() as number;
          if (leases.at(-1) !== until) {
            leases.push(until);
            clock.advance(200);
          }
          return leases.length >= 4;
        },
        { timeoutMs: 10_000, what: "three renewals" },
      );
    });
    const { id } = await enqueue(t.database.db, enqueueCtx(clock), job, {});
    const l = loop([job], { clock, leaseMs: 600 });
    await l.start();
    await waitFor(async () => (await jobRow(t.database, id)).status === "succeeded", { what: "the run" });
    expect(aborted).toBe(false);
    expect((await jobRow(t.database, id)).attempts).toBe(1);
    // each renewal: the clock's now + the lease
    expect(leases.slice(1).every((until, i) => until > (leases[i] as number))).toBe(true);
    await l.stop(1_000);
  });

  test("a run whose lease expired is taken over; the stale worker's late success is not recorded", async () => {
    const clock = new ManualClock();
    let releaseFirst: () => void = () => {};
    const runs: { worker: string; attempt: number }[] = [];
    const makeJob = (worker: string) =>
      defineJob("loop.takeover", z.object({}), async (_p, c) => {
        runs.push({ worker, attempt: c.attempt });
        if (worker === "a") await new Promise<void>((r) => (releaseFirst = r));
      });
    const { id } = await enqueue(t.database.db, enqueueCtx(clock), makeJob("a"), {});
    const events: JobEvent[] = [];
    const a = loop([makeJob("a")], { clock, workerId: "a", onEvent: (e) => events.push(e) });
    await a.start();
    await waitFor(() => runs.length === 1, { what: "a to start" });

    const bClock = new ManualClock(clock.now());
    const bClaims: number[] = [];
    const b = loop([makeJob("b")], {
      clock: bClock,
      workerId: "b",
      onEvent: (e) => e.type === "claimed" && bClaims.push(e.count),
    });
    await b.start();
    await waitFor(() => bClaims.length === 1, { what: "b's first poll" });
    // within the lease b's claim finds nothing
    bClock.advance(LEASE_MS - 1);
    b.wake();
    await waitFor(() => bClaims.length === 2, { what: "b's claim within the lease" });
    expect(bClaims).toEqual([0, 0]);
    expect((await jobRow(t.database, id)).locked_by).toBe("a");
    bClock.advance(2);
    b.wake();
    await waitFor(async () => (await jobRow(t.database, id)).status === "succeeded", { what: "b to finish" });
    expect(await jobRow(t.database, id)).toMatchObject({ attempts: 2 });
    releaseFirst();
    await waitFor(() => events.some((e) => e.type === "lost" && e.id === id), { what: "a's result dropped" });
    expect(runs).toEqual([
      { worker: "a", attempt: 1 },
      { worker: "b", attempt: 2 },
    ]);
    expect(await jobRow(t.database, id)).toMatchObject({ status: "succeeded", attempts: 2 });
    await Promise.all([a.stop(1_000), b.stop(1_000)]);
  });

  test("stop lets quick jobs finish and releases the rest without counting the attempt", async () => {
    const clock = new ManualClock();
    let quickDone = 0;
    let aborted = 0;
    const quick = defineJob("loop.quick", z.object({}), async () => {
      await Bun.sleep(20);
      quickDone++;
    });
    const stuck = defineJob("loop.stuck", z.object({}), async (_p, c) => {
      await new Promise<void>((resolve) =>
        c.signal.addEventListener("abort", () => {
          aborted++;
          resolve();
        }),
      );
    });
    const { id: quickId } = await enqueue(t.database.db, enqueueCtx(clock), quick, {});
    const { id: stuckId } = await enqueue(t.database.db, enqueueCtx(clock), stuck, {});
    const l = loop([quick, stuck], { clock });
    await l.start();
    await waitFor(() => l.running() === 2 || quickDone === 1, { what: "both running" });
    const result = await l.stop(300);
    expect(result.released).toEqual([stuckId]);
    expect(aborted).toBe(1);
    expect(await jobRow(t.database, quickId)).toMatchObject({ status: "succeeded" });
    expect(await jobRow(t.database, stuckId)).toMatchObject({
      status: "pending",
      attempts: 0,
      locked_by: null,
      locked_until: null,
    });
    // another process takes it at once, not after the lease
    let ranAgain = 0;
    const again = loop([defineJob("loop.stuck", z.object({}), () => void ranAgain++)], { clock });
    await again.start();
    await waitFor(() => ranAgain === 1, { what: "released job taken" });
    await again.stop(1_000);
  });

  test("a job enqueued while a success is being recorded starts at once, not after the write", async () => {
    const startedIds: number[] = [];
    let finishFirst!: () => void;
    const firstMayFinish = new Promise<void>((r) => (finishFirst = r));
    const job = defineJob("loop.beside", z.object({ first: z.boolean() }), async (p, c) => {
      startedIds.push(c.id);
      if (p.first) await firstMayFinish;
    });
    const clock = new ManualClock();
    const l = loop([job], { clock, pollMs: 60_000 });
    await l.start();
    const first = await enqueue(t.database.db, enqueueCtx(clock), job, { first: true });
    await waitFor(() => startedIds.includes(first.id), { what: "the first job to start" });
    // another transaction holds the first job's row: recording its success waits for it
    let unlock!: () => void;
    const locked = new Promise<void>((r) => (unlock = r));
    let holding!: () => void;
    const held = new Promise<void>((r) => (holding = r));
    const holder = t.database.db.transaction(async (tx) => {
      await execute(tx, sql`select id from background_jobs where id = ${first.id} for update`);
      holding();
      await locked;
    });
    await held;
    finishFirst();
    await waitFor(
      async () => {
        const [r] = await execute<{ n: number }>(
          t.database.db,
          sql`select count(*)::int as n from pg_stat_activity
              where wait_event_type = 'Lock' and query like '%background_jobs%' and datname = current_database()`,
        );
        return (r?.n ?? 0) > 0;
      },
      { what: "the success's write to wait on the lock" },
    );
    const second = await enqueue(t.database.db, enqueueCtx(clock), job, { first: false });
    await waitFor(() => startedIds.includes(second.id), {
      timeoutMs: 5_000,
      what: "the second job to start while the first one's success waits",
    });
    expect((await jobRow(t.database, first.id)).status).toBe("processing");
    unlock();
    await holder;
    await waitFor(async () => (await jobRow(t.database, first.id)).status === "succeeded", {
      what: "the first success recorded once the lock is gone",
    });
    await l.stop(1_000);
  });
});
