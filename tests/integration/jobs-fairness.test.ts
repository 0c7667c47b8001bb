import { describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock, systemClock } from "../../src/clock.ts";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import { claimJobs, completeAndClaimJobs } from "../../src/jobs/claim.ts";
import { enqueue, enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop } from "../../src/jobs/job-loop.ts";
import { completeJobs, failJob, releaseJobs } from "../../src/jobs/outcomes.ts";
import { LEASE_MS } from "../../src/jobs/queue.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

const clock = new ManualClock("2030-01-01T00:00:00Z");
const ctx = { clock };
const t = useTestDatabase({ poolSize: 4 });

/** Each test works on its own kind so tests in this file never claim each other's jobs. */
function kindFor(name: string, options: { groupConcurrency?: number } = {}) {
  return defineJob(`fair.${name}`, z.object({ n: z.number().optional() }), () => {}, options);
}

const seconds = (s: number) => new Date(clock.now().getTime() + s * 1000);

describe("round robin over groups", () => {
  test("one claim at a time visits every group in turn; the jobs without a group are one group", async () => {
    const job = kindFor("turns");
    const kinds = [job.kind];
    // older jobs first in each group; group c's jobs are the oldest of all
    for (const [group, n] of [
      ["c", 3],
      ["a", 3],
      ["b", 3],
      [null, 2],
    ] as const)
      await enqueueMany(
        t.database.db,
        ctx,
        Array.from({ length: n }, (_, i) => ({ job, payload: { n: i }, options: { groupKey: group } })),
      );
    const order: (string | null)[] = [];
    let cursor = "";
    for (let i = 0; i < 11; i++) {
      const result = await completeAndClaimJobs(t.database.db, {
        workerId: "w",
        kinds,
        limit: 1,
        now: seconds(1),
        complete: [],
        groupCursor: cursor,
      });
      cursor = result.cursor;
      expect(result.claimed).toHaveLength(1);
      order.push(result.claimed[0]?.groupKey ?? null);
    }
    expect(order).toEqual(["a", "b", "c", null, "a", "b", "c", null, "a", "b", "c"]);
    // each group's jobs in the order they became due
    const payloads = await execute<{ group_key: string | null; ns: number[] }>(
      t.database.db,
      sql`select group_key, array_agg((payload->>'n')::int order by updated_at, id) as ns
          from background_jobs where kind = ${job.kind} group by group_key`,
    );
    for (const p of payloads) expect(p.ns).toEqual(p.group_key === null ? [0, 1] : [0, 1, 2]);
  });

  test("one batch takes the first job of every group before anyone's second", async () => {
    const job = kindFor("batch");
    await enqueueMany(
      t.database.db,
      ctx,
      Array.from({ length: 12 }, (_, i) => ({ job, payload: { n: i }, options: { groupKey: `g${i % 3}` } })),
    );
    const claimed = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [job.kind],
      limit: 5,
      now: seconds(1),
    });
    const groups = claimed.map((c) => c.groupKey).sort();
    expect(groups).toEqual(["g0", "g0", "g1", "g1", "g2"]);
  });

  test("a small tenant's job behind a 20,000-job backlog of another is in the first batch", async () => {
    const job = kindFor("bound");
    const backlog = Array.from({ length: 20_000 }, (_, i) => ({
      job,
      payload: { n: i },
      options: { tenantId: "big-tenant", runAfter: new Date(clock.now().getTime() - 60_000 + i) },
    }));
    await enqueueMany(t.database.db, ctx, backlog);
    const small = await enqueue(t.database.db, ctx, job, { n: -1 }, { tenantId: "small-tenant" });
    await execute(t.database.db, sql`analyze background_jobs`);
    const first = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [job.kind],
      limit: 5,
      now: seconds(1),
    });
    expect(first).toHaveLength(5);
    expect(first.map((c) => c.id)).toContain(small.id);
    expect(first.filter((c) => c.groupKey === "big-tenant")).toHaveLength(4);

    // the same backlog without groups: the newest job waits behind all 20,000
    const plain = kindFor("bound-plain");
    await enqueueMany(
      t.database.db,
      ctx,
      backlog.map((b) => ({ ...b, job: plain, options: { runAfter: b.options.runAfter } })),
    );
    const late = await enqueue(t.database.db, ctx, plain, { n: -1 });
    const batch = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [plain.kind],
      limit: 5,
      now: seconds(1),
    });
    expect(batch.map((c) => c.id)).not.toContain(late.id);
  }, 60_000);

  test("a running job loop starts the small tenant's job within 0.5 s while the backlog drains", async () => {
    let smallStarted = 0;
    let bigRuns = 0;
    const job = defineJob("fair.loop", z.object({ small: z.boolean() }), async (p) => {
      if (p.small) smallStarted = performance.now();
      else bigRuns++;
      await Bun.sleep(2); // a backlog of 20,000 would take over 10 s to get through at 4 slots
    });
    const realCtx = { clock: systemClock };
    await enqueueMany(
      t.database.db,
      realCtx,
      Array.from({ length: 20_000 }, () => ({
        job,
        payload: { small: false },
        options: { tenantId: "big" },
      })),
    );
    const redactor = createRedactor([]);
    const loop = createJobLoop(
      {
        database: t.database,
        clock: systemClock,
        logger: createLogger({ level: "error", redactor, write: () => {} }),
        redactor,
      },
      { registry: createJobRegistry([job]), parallelism: 4, batchSize: 5, pollMs: 2_000 },
    );
    await loop.start();
    try {
      await waitFor(() => bigRuns > 100, { what: "the backlog draining" });
      const enqueuedAt = performance.now();
      await enqueue(t.database.db, realCtx, job, { small: true }, { tenantId: "small" });
      await waitFor(() => smallStarted > 0, { what: "the small tenant's job starting" });
      expect(smallStarted - enqueuedAt).toBeLessThan(500);
      expect(bigRuns).toBeLessThan(20_000 - 1_000);
    } finally {
      await loop.stop(5_000);
      await execute(t.database.db, sql`delete from background_jobs where kind = 'fair.loop'`);
    }
  }, 60_000);
});

describe("priorities", () => {
  test("higher priority first, before fairness; a claim takes one priority and says lower ones wait", async () => {
    const job = kindFor("prio");
    const kinds = [job.kind];
    await enqueueMany(
      t.database.db,
      ctx,
      Array.from({ length: 6 }, (_, i) => ({ job, payload: { n: i }, options: { groupKey: `g${i % 2}` } })),
    );
    const urgent = await enqueue(t.database.db, ctx, job, { n: 100 }, { groupKey: "g0", priority: 10 });
    const high = await enqueue(t.database.db, ctx, job, { n: 101 }, { priority: 5 });
    const low = await enqueue(t.database.db, ctx, job, { n: 102 }, { groupKey: "g9", priority: -1 });

    const first = await completeAndClaimJobs(t.database.db, {
      workerId: "w",
      kinds,
      limit: 5,
      now: seconds(1),
      complete: [],
    });
    expect(first.claimed.map((c) => c.id)).toEqual([urgent.id]);
    expect(first.more).toBe(true);
    const second = await claimJobs(t.database.db, { workerId: "w", kinds, limit: 5, now: seconds(1) });
    expect(second.map((c) => c.id)).toEqual([high.id]);
    const third = await claimJobs(t.database.db, { workerId: "w", kinds, limit: 5, now: seconds(1) });
    expect(third.map((c) => c.priority)).toEqual([0, 0, 0, 0, 0]);
    expect(new Set(third.map((c) => c.groupKey))).toEqual(new Set(["g0", "g1"]));
    const fourth = await completeAndClaimJobs(t.database.db, {
      workerId: "w",
      kinds,
      limit: 5,
      now: seconds(1),
      complete: [],
    });
    expect(fourth.claimed).toHaveLength(1);
    expect(fourth.more).toBe(true);
    const fifth = await completeAndClaimJobs(t.database.db, {
      workerId: "w",
      kinds,
      limit: 5,
      now: seconds(1),
      complete: [],
    });
    expect(fifth.claimed.map((c) => c.id)).toEqual([low.id]);
    expect(fifth.more).toBe(false);
  });

  test("a job loop drains every priority without waiting for a poll between them", async () => {
    const seen: number[] = [];
    const job = defineJob("fair.loop-prio", z.object({ p: z.number() }), (p) => {
      seen.push(p.p);
    });
    const realCtx = { clock: systemClock };
    await enqueueMany(
      t.database.db,
      realCtx,
      [3, 2, 1, 0, -1].flatMap((p) =>
        Array.from({ length: 3 }, () => ({ job, payload: { p }, options: { priority: p } })),
      ),
    );
    const redactor = createRedactor([]);
    const loop = createJobLoop(
      {
        database: t.database,
        clock: systemClock,
        logger: createLogger({ level: "error", redactor, write: () => {} }),
        redactor,
      },
      // one slot: runs in claim order; a poll of a minute would fail the wait below
      { registry: createJobRegistry([job]), parallelism: 1, batchSize: 5, pollMs: 60_000, listen: false },
    );
    await loop.start();
    try {
      await waitFor(() => seen.length === 15, { timeoutMs: 20_000, what: "all five priorities run" });
      expect(seen).toEqual([3, 3, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0, -1, -1, -1]);
    } finally {
      await loop.stop(5_000);
    }
  }, 30_000);
});

describe("groupConcurrency", () => {
  test("claimers on separate connections racing for a group never hold more than its limit", async () => {
    const job = kindFor("limited", { groupConcurrency: 2 });
    const limits = { [job.kind]: 2 };
    await enqueueMany(t.database.db, ctx, [
      ...Array.from({ length: 200 }, (_, i) => ({ job, payload: { n: i }, options: { groupKey: "hot" } })),
      ...Array.from({ length: 20 }, (_, i) => ({ job, payload: { n: i }, options: { groupKey: "cool" } })),
    ]);
    const pools: Database[] = await Promise.all(
      Array.from({ length: 6 }, () => openDatabase(t.url, { poolSize: 1 })),
    );
    const processing = async (group: string) => {
      const [r] = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs
            where kind = ${job.kind} and group_key = ${group} and status = 'processing'`,
      );
      return r?.n ?? -1;
    };
    try {
      for (let round = 0; round < 10; round++) {
        // every claimer at once, each on its own connection
        const results = await Promise.all(
          pools.map((p, i) =>
            claimJobs(p.db, {
              workerId: `w${i}`,
              kinds: [job.kind],
              limit: 5,
              now: seconds(1),
              groupLimits: limits,
            }),
          ),
        );
        expect(await processing("hot")).toBeLessThanOrEqual(2);
        expect(await processing("cool")).toBeLessThanOrEqual(2);
        // finish what was claimed, so the next round races for freed slots
        await Promise.all(
          results.map((claimed, i) =>
            completeJobs(pools[i]?.db ?? t.database.db, {
              workerId: `w${i}`,
              jobs: claimed,
              now: seconds(1),
            }),
          ),
        );
      }
      const [done] = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs where kind = ${job.kind} and status = 'succeeded'`,
      );
      // both groups made progress (two slots each per round at most)
      expect(done?.n).toBeGreaterThanOrEqual(20);
      expect(done?.n).toBeLessThanOrEqual(40);
      const [slots] = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from job_group_slots where kind = ${job.kind}`,
      );
      expect(slots?.n).toBe(0);
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
  }, 60_000);

  test("a slot frees when its job fails or is released, and stays with a job taken over after its lease", async () => {
    const job = kindFor("slots", { groupConcurrency: 1 });
    const limits = { [job.kind]: 1 };
    await enqueueMany(
      t.database.db,
      ctx,
      Array.from({ length: 4 }, (_, i) => ({ job, payload: { n: i }, options: { groupKey: "g" } })),
    );
    const claim = (now: Date, workerId = "w") =>
      completeAndClaimJobs(t.database.db, {
        workerId,
        kinds: [job.kind],
        limit: 5,
        now,
        complete: [],
        groupLimits: limits,
      });
    const first = await claim(seconds(1));
    expect(first.claimed).toHaveLength(1);
    const [running] = first.claimed;
    if (!running) throw new Error("nothing claimed");
    const full = await claim(seconds(2));
    expect(full.claimed).toHaveLength(0);

    // the lease ends: another worker takes the same job over, keeping the slot; nothing else starts
    const late = new Date(seconds(1).getTime() + LEASE_MS + 1_000);
    const takeover = await claim(late, "w2");
    expect(takeover.claimed.map((c) => c.id)).toEqual([running.id]);
    const [held] = await execute<{ job_id: string }>(
      t.database.db,
      sql`select job_id from job_group_slots where kind = ${job.kind}`,
    );
    expect(Number(held?.job_id)).toBe(running.id);

    // it fails (retry later): the slot frees and the next job of the group starts
    const retried = takeover.claimed[0];
    if (!retried) throw new Error("no takeover");
    expect(
      await failJob(t.database.db, {
        workerId: "w2",
        job: retried,
        now: late,
        error: "boom",
        retryAt: new Date(late.getTime() + 3_600_000),
      }),
    ).toBe(true);
    const next = await claim(late, "w2");
    expect(next.claimed).toHaveLength(1);
    expect(next.claimed[0]?.id).not.toBe(running.id);

    // released on shutdown: the slot frees too, and one job of the group starts again
    expect(await claim(late, "w3")).toMatchObject({ claimed: [] });
    await releaseJobs(t.database.db, { workerId: "w2", jobs: next.claimed, now: late });
    const again = await claim(late, "w3");
    expect(again.claimed).toHaveLength(1);
    const [count] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from job_group_slots where kind = ${job.kind}`,
    );
    expect(count?.n).toBe(1);
  });
});
