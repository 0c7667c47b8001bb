// The job loop's local queue (`BackgroundProcessing:JobLocalQueueSize`): jobs claimed ahead of the
// free slots, under lease, started without a round trip. Real PostgreSQL, real loops.
import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { type Database, execute } from "../../src/db/client.ts";
import { cancelJob } from "../../src/jobs/admin/cancel-job.ts";
import { enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop, type JobEvent, type JobLoop, type JobLoopOptions } from "../../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob, type JobDefinition } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/database.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";

const started: JobLoop[] = [];
const opened: Database[] = [];
const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: () => {} });

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
    { database: database ?? t.database, clock: clock ?? new ManualClock(), logger, redactor },
    {
      registry: createJobRegistry(definitions),
      parallelism: 2,
      batchSize: 5,
      pollMs: 2_000,
      localQueue: 50,
      ...rest,
    },
  );
  started.push(l);
  return l;
}

/** A job kind whose runs wait until `open()`; `ran` lists the ids that started. */
function gated(kind: string) {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const ran: number[] = [];
  const job = defineJob(kind, z.object({ n: z.number() }), async (_p, c) => {
    ran.push(c.id);
    await gate;
  });
  return { job, ran, open };
}

const statuses = async (kind: string) =>
  execute<{ id: number; status: string; attempts: number; locked_by: string | null }>(
    t.database.db,
    sql`select id::int as id, status, attempts, locked_by from background_jobs where kind = ${kind} order by id`,
  );

describe("the local queue", () => {
  test("claims ahead of the free slots; several loops still run every job exactly once", async () => {
    const runs = new Map<number, number>();
    const job = defineJob("lq.many", z.object({ n: z.number() }), async (_p, c) => {
      runs.set(c.id, (runs.get(c.id) ?? 0) + 1);
      if (c.id % 5 === 0) await Bun.sleep(0);
    });
    const clock = new ManualClock();
    const ids = await enqueueMany(
      t.database.db,
      { clock },
      Array.from({ length: 3_000 }, (_, n) => ({ job, payload: { n } })),
    );
    const claims: number[] = [];
    const loops: JobLoop[] = [];
    for (let i = 0; i < 3; i++) {
      const database = await openTestDatabase(t.url, { poolSize: 3 });
      opened.push(database);
      loops.push(
        loop([job], {
          clock,
          database,
          workerId: `lq-${i}`,
          localQueue: 200,
          onEvent: (e: JobEvent) => {
            if (e.type === "claimed") claims.push(e.count);
          },
        }),
      );
    }
    await Promise.all(loops.map((l) => l.start()));
    await waitFor(() => runs.size === ids.length, { timeoutMs: 30_000, what: "all jobs to run" });
    await waitFor(
      async () => {
        const rows = await statuses(job.kind);
        return rows.every((r) => r.status === "succeeded");
      },
      { what: "all jobs recorded" },
    );
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    // no-op jobs: the queue grows past the two slots and the batch size
    expect(Math.max(...claims)).toBeGreaterThan(5);
    await Promise.all(loops.map((l) => l.stop(1_000)));
  });

  test("holds about 50 ms of work: jobs longer than that get no queue beyond the slots", async () => {
    const seen: number[] = [];
    let l!: JobLoop;
    let count = 0;
    const job = defineJob("lq.slow", z.object({ n: z.number() }), async () => {
      if (++count > 4) seen.push(l.queued()); // after the first runs measured the run time
      await Bun.sleep(60);
    });
    const clock = new ManualClock();
    await enqueueMany(
      t.database.db,
      { clock },
      Array.from({ length: 14 }, (_, n) => ({ job, payload: { n } })),
    );
    l = loop([job], { clock, localQueue: 100 });
    await l.start();
    await waitFor(() => count === 14, { timeoutMs: 20_000, what: "all slow jobs to start" });
    // 50 ms of work at ~60 ms a run over 2 slots is one job: never the 100 the setting allows
    expect(seen.length).toBe(10);
    expect(Math.max(...seen)).toBeLessThanOrEqual(5); // the first claims' batch drains away
    expect(seen.slice(-4).every((n) => n <= 1)).toBe(true);
    await l.stop(5_000);
  });

  test("a queued job an admin cancels never starts; the others run", async () => {
    const { job, ran, open } = gated("lq.cancel");
    const clock = new ManualClock();
    const ids = await enqueueMany(
      t.database.db,
      { clock },
      Array.from({ length: 4 }, (_, n) => ({ job, payload: { n } })),
    );
    const events: JobEvent[] = [];
    const l = loop([job], { clock, parallelism: 1, onEvent: (e) => events.push(e) });
    await l.start();
    await waitFor(() => ran.length === 1 && l.queued() === 3, { what: "one running, three queued" });
    const target = ids[2] as number;
    expect(ran).not.toContain(target);
    expect((await jobRow(t.database, target)).status).toBe("processing"); // claimed ahead
    await cancelJob({ database: t.database, clock, logger }, systemCtx("lq-admin"), { id: target });
    await waitFor(() => l.queued() === 2, { what: "the cancel NOTIFY to drop the queued job" });
    open();
    await waitFor(() => ran.length === 3, { what: "the other jobs to run" });
    await waitFor(
      async () => (await statuses(job.kind)).filter((r) => r.status === "succeeded").length === 3,
      { what: "three recorded" },
    );
    expect(ran).not.toContain(target);
    expect((await jobRow(t.database, target)).status).toBe("canceled");
    expect(events.some((e) => e.type === "canceled" && e.id === target)).toBe(true);
    await l.stop(1_000);
  });

  test("stop gives queued jobs back at once without counting an attempt", async () => {
    const { job, ran, open } = gated("lq.stop");
    const clock = new ManualClock();
    const ids = await enqueueMany(
      t.database.db,
      { clock },
      Array.from({ length: 6 }, (_, n) => ({ job, payload: { n } })),
    );
    const l = loop([job], { clock, parallelism: 1, workerId: "lq-stopper" });
    await l.start();
    await waitFor(() => ran.length === 1 && l.queued() === 5, { what: "one running, five queued" });
    const stopping = l.stop(60_000); // the running job holds the stop; the queue goes back first
    await waitFor(async () => (await statuses(job.kind)).filter((r) => r.status === "pending").length === 5, {
      what: "the queued jobs released while the running one still runs",
    });
    for (const r of await statuses(job.kind))
      if (r.id !== ran[0]) expect(r).toMatchObject({ status: "pending", attempts: 0, locked_by: null });
    open();
    const { released } = await stopping;
    expect(released.sort()).toEqual(ids.filter((id) => id !== ran[0]).sort());
    expect(ran).toHaveLength(1);
    expect((await jobRow(t.database, ran[0] as number)).status).toBe("succeeded");
  });

  test("the heartbeat renews queued jobs' leases; one taken over meanwhile is dropped, not run", async () => {
    const { job, ran, open } = gated("lq.lease");
    const clock = new ManualClock();
    const ids = await enqueueMany(
      t.database.db,
      { clock },
      Array.from({ length: 3 }, (_, n) => ({ job, payload: { n } })),
    );
    const events: JobEvent[] = [];
    const l = loop([job], {
      clock,
      parallelism: 1,
      workerId: "lq-beat",
      leaseMs: 60_000,
      heartbeatMs: 20,
      onEvent: (e) => events.push(e),
    });
    await l.start();
    await waitFor(() => ran.length === 1 && l.queued() === 2, { what: "one running, two queued" });
    const [, second, third] = ids as [number, number, number];
    const before = (await jobRow(t.database, third)).locked_until?.getTime() ?? 0;
    // another worker took the second job over (as after a lease that ran out)
    await execute(
      t.database.db,
      sql`update background_jobs set locked_by = 'someone-else' where id = ${second}`,
    );
    clock.advance(10_000);
    await waitFor(async () => ((await jobRow(t.database, third)).locked_until?.getTime() ?? 0) > before, {
      what: "the queued job's lease to move",
    });
    await waitFor(() => l.queued() === 1, { what: "the lost job to leave the queue" });
    expect(events.some((e) => e.type === "lost" && e.id === second)).toBe(true);
    open();
    await waitFor(() => ran.length === 2, { what: "the third job to run" });
    expect(ran).not.toContain(second);
    expect(ran).toContain(third);
    await l.stop(1_000);
  });

  test("a queued job whose lease is about to end is not started", async () => {
    const { job, ran, open } = gated("lq.expiring");
    const clock = new ManualClock();
    await enqueueMany(
      t.database.db,
      { clock },
      Array.from({ length: 3 }, (_, n) => ({ job, payload: { n } })),
    );
    const l = loop([job], { clock, parallelism: 1, leaseMs: 60_000, heartbeatMs: 0 });
    await l.start();
    await waitFor(() => ran.length === 1 && l.queued() === 2, { what: "one running, two queued" });
    clock.advance(57_000); // within the abort margin (6 s) of the end of the lease; no heartbeats
    open();
    await waitFor(() => l.queued() === 0, { what: "the queue to empty" });
    expect(ran).toHaveLength(1);
    await l.stop(1_000);
  });
});

describe("a large claim over groups", () => {
  test("a loop with a local queue drains an uneven backlog without waiting for a poll", async () => {
    let ran = 0;
    const job = defineJob("lq.uneven", z.object({ n: z.number() }), () => {
      ran++;
    });
    const clock = new ManualClock();
    // one big group and thirty of one job each: large claims come back short (fair shares) and
    // must say `more`, or the loop would wait for the next poll (a minute, no NOTIFY)
    await enqueueMany(t.database.db, { clock }, [
      ...Array.from({ length: 1_500 }, (_, n) => ({ job, payload: { n }, options: { tenantId: "big" } })),
      ...Array.from({ length: 30 }, (_, n) => ({ job, payload: { n }, options: { tenantId: `one-${n}` } })),
    ]);
    const claims: number[] = [];
    const l = loop([job], {
      clock,
      localQueue: 300,
      listen: false,
      pollMs: 60_000,
      onEvent: (e) => {
        if (e.type === "claimed") claims.push(e.count);
      },
    });
    await l.start();
    await waitFor(() => ran === 1_530, { timeoutMs: 20_000, what: "the whole backlog to run" });
    expect(Math.max(...claims)).toBeGreaterThan(16); // large claims were made
    await l.stop(1_000);
  });

  test("offers each group its fair share, and says more when it came back short", async () => {
    const { claimJobs, completeAndClaimJobs } = await import("../../src/jobs/claim.ts");
    const job = defineJob("lq.groups", z.object({ n: z.number() }), () => {});
    const clock = new ManualClock();
    // one big group and nine groups of one job: a claim of 100 offers each group 10
    await enqueueMany(t.database.db, { clock }, [
      ...Array.from({ length: 200 }, (_, n) => ({ job, payload: { n }, options: { tenantId: "big" } })),
      ...Array.from({ length: 9 }, (_, n) => ({ job, payload: { n }, options: { tenantId: `small-${n}` } })),
    ]);
    const input = { workerId: "lq-claim", kinds: [job.kind], limit: 100, now: clock.now() };
    const first = await completeAndClaimJobs(t.database.db, { ...input, complete: [] });
    expect(first.claimed).toHaveLength(19);
    expect(first.more).toBe(true);
    expect(first.claimed.filter((j) => j.groupKey === "big")).toHaveLength(10);
    // claiming again goes on with the big group's backlog
    const second = await claimJobs(t.database.db, { ...input, groupCursor: first.cursor });
    expect(second.length).toBe(100);
    const [locked] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from background_jobs where kind = ${job.kind} and status = 'processing'`,
    );
    expect(locked?.n).toBe(119);
  });
});
