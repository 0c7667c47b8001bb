import { describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { AppError } from "../../src/errors.ts";
import { getJob } from "../../src/jobs/admin/get-job.ts";
import { listJobs } from "../../src/jobs/admin/list-jobs.ts";
import { retryDeadJob } from "../../src/jobs/admin/retry-job.ts";
import { claimJobs } from "../../src/jobs/claim.ts";
import { enqueue, enqueueMany, InvalidJobPayloadError } from "../../src/jobs/enqueue.ts";
import { completeJobs, failJob, releaseJobs } from "../../src/jobs/outcomes.ts";
import {
  DEFAULT_RETRY_POLICY,
  LEASE_MS,
  orphanedJobKinds,
  pruneJobs,
  renewLeases,
  retryDelayMs,
} from "../../src/jobs/queue.ts";
import { defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { jobRow } from "../helpers/jobs.ts";

const silent = createLogger({ level: "error", redactor: createRedactor([]), write: () => {} });

const email = defineJob("test.email", z.object({ to: z.email() }), () => {});
const other = defineJob("test.other", z.object({}), () => {});

const clock = new ManualClock("2030-01-01T00:00:00Z");
const ctx = { clock };
const t = useTestDatabase();

/** Each test works on its own kind so tests in this file never claim each other's jobs. */
function kindFor(name: string) {
  return defineJob(`test.${name}`, z.object({ n: z.number().optional() }), () => {});
}

describe("enqueue", () => {
  test("validates the payload with the kind's schema and stores nothing when it fails", async () => {
    await expect(enqueue(t.database.db, ctx, email, { to: "not an email" })).rejects.toBeInstanceOf(
      InvalidJobPayloadError,
    );
    const rows = await execute(t.database.db, sql`select 1 from background_jobs where kind = 'test.email'`);
    expect(rows).toHaveLength(0);
  });

  test("a tenant's job takes the tenant id as its group; an explicit group and a priority are stored", async () => {
    const job = kindFor("groups");
    const tenantJob = await enqueue(t.database.db, ctx, job, {}, { tenantId: "tenant-a" });
    const grouped = await enqueue(
      t.database.db,
      ctx,
      job,
      {},
      { tenantId: "tenant-a", groupKey: "import:7", priority: 5 },
    );
    const plain = await enqueue(t.database.db, ctx, job, {});
    const ids = [tenantJob.id, grouped.id, plain.id];
    const rows = await execute<{ id: string; group_key: string | null; priority: number }>(
      t.database.db,
      sql`select id, group_key, priority from background_jobs where id in (${sql.join(
        ids.map((i) => sql`${i}`),
        sql`, `,
      )}) order by id`,
    );
    expect(rows.map((r) => [r.group_key, r.priority])).toEqual([
      ["tenant-a", 0],
      ["import:7", 5],
      [null, 0],
    ]);
    await expect(enqueue(t.database.db, ctx, job, {}, { priority: 1.5 })).rejects.toThrow(/priority/);
  });

  test("a dedup key holds while the job is unfinished, then frees", async () => {
    const job = kindFor("dedup");
    const first = await enqueue(t.database.db, ctx, job, {}, { dedupKey: "welcome:1" });
    const second = await enqueue(t.database.db, ctx, job, {}, { dedupKey: "welcome:1" });
    expect(first.created).toBe(true);
    expect(second).toEqual({ id: first.id, created: false });
    const [claimed] = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [job.kind],
      limit: 5,
      now: clock.now(),
    });
    expect(claimed?.id).toBe(first.id);
    // still held while processing
    expect((await enqueue(t.database.db, ctx, job, {}, { dedupKey: "welcome:1" })).created).toBe(false);
    await completeJobs(t.database.db, {
      workerId: "w",
      jobs: [{ id: first.id, attempts: 1 }],
      now: clock.now(),
    });
    const third = await enqueue(t.database.db, ctx, job, {}, { dedupKey: "welcome:1" });
    expect(third.created).toBe(true);
    expect(third.id).not.toBe(first.id);
  });

  test("a delayed job is not claimed before its runAfter", async () => {
    const job = kindFor("delayed");
    const { id } = await enqueue(
      t.database.db,
      ctx,
      job,
      {},
      { runAfter: new Date(clock.now().getTime() + 60_000) },
    );
    const claim = (now: Date) =>
      claimJobs(t.database.db, { workerId: "w", kinds: [job.kind], limit: 5, now });
    expect(await claim(new Date(clock.now().getTime() + 59_999))).toHaveLength(0);
    const [claimed] = await claim(new Date(clock.now().getTime() + 60_000));
    expect(claimed?.id).toBe(id);
  });

  test("bulk enqueue inside a rolled-back transaction enqueues nothing", async () => {
    const job = kindFor("rollback");
    await expect(
      t.database.db.transaction(async (tx) => {
        const ids = await enqueueMany(
          tx,
          ctx,
          Array.from({ length: 7_000 }, (_, n) => ({ job, payload: { n } })),
        );
        expect(ids).toHaveLength(7_000);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    const [row] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from background_jobs where kind = ${job.kind}`,
    );
    expect(row?.n).toBe(0);
  });

  test("bulk enqueue commits with the caller's transaction", async () => {
    const job = kindFor("bulk");
    await t.database.db.transaction(async (tx) => {
      await enqueueMany(tx, ctx, [
        { job, payload: { n: 1 } },
        { job, payload: { n: 2 }, options: { dedupKey: "bulk:a" } },
        { job, payload: { n: 3 }, options: { dedupKey: "bulk:a" } },
      ]);
    });
    const rows = await execute<{ n: number }>(
      t.database.db,
      sql`select (payload->>'n')::int as n from background_jobs where kind = ${job.kind} order by 1`,
    );
    expect(rows.map((r) => r.n)).toEqual([1, 2]);
  });
});

describe("claim", () => {
  test("claims only the kinds asked for, at most `limit`, counting the attempt and setting a five-minute lease", async () => {
    const job = kindFor("limit");
    await enqueueMany(t.database.db, ctx, [
      ...Array.from({ length: 8 }, () => ({ job, payload: {} })),
      { job: other, payload: {} },
    ]);
    const now = clock.now();
    const claimed = await claimJobs(t.database.db, { workerId: "w1", kinds: [job.kind], limit: 3, now });
    expect(claimed).toHaveLength(3);
    for (const c of claimed) {
      expect(c.kind).toBe(job.kind);
      expect(c.attempts).toBe(1);
      expect(c.lockedUntil.getTime()).toBe(now.getTime() + LEASE_MS);
      const row = await jobRow(t.database, c.id);
      expect(row.status).toBe("processing");
      expect(row.locked_by).toBe("w1");
    }
    const rest = await claimJobs(t.database.db, { workerId: "w2", kinds: [job.kind], limit: 100, now });
    expect(rest).toHaveLength(5);
    const [row] = await execute<{ status: string }>(
      t.database.db,
      sql`select status from background_jobs where kind = 'test.other'`,
    );
    expect(row?.status).toBe("pending");
  });

  test("a processing row of an older deployment is taken over after its lease, not before; nothing resets it", async () => {
    const job = kindFor("olddeploy");
    const takenAt = clock.now();
    const [row] = await execute<{ id: number }>(
      t.database.db,
      sql`insert into background_jobs (kind, status, attempts, locked_by, locked_until, run_after)
          values (${job.kind}, 'processing', 1, 'old-deployment:1', ${new Date(takenAt.getTime() + LEASE_MS).toISOString()}::timestamptz, ${takenAt.toISOString()}::timestamptz)
          returning id::int as id`,
    );
    const id = row?.id as number;
    const claim = (ms: number) =>
      claimJobs(t.database.db, {
        workerId: "new",
        kinds: [job.kind],
        limit: 5,
        now: new Date(takenAt.getTime() + ms),
      });
    expect(await claim(LEASE_MS - 1_000)).toHaveLength(0);
    expect(await claim(LEASE_MS)).toHaveLength(0); // the lease holds up to and including its end
    expect((await jobRow(t.database, id)).locked_by).toBe("old-deployment:1");
    const [taken] = await claim(LEASE_MS + 1);
    expect(taken).toMatchObject({ id, attempts: 2 });
    expect((await jobRow(t.database, id)).locked_by).toBe("new");
  });

  test("a stale worker's late completion or failure does not overwrite the new owner", async () => {
    const job = kindFor("stale");
    const { id } = await enqueue(t.database.db, ctx, job, {});
    const start = clock.now();
    const [first] = await claimJobs(t.database.db, {
      workerId: "slow",
      kinds: [job.kind],
      limit: 1,
      now: start,
    });
    expect(first?.attempts).toBe(1);
    const later = new Date(start.getTime() + LEASE_MS + 1);
    const [second] = await claimJobs(t.database.db, {
      workerId: "fresh",
      kinds: [job.kind],
      limit: 1,
      now: later,
    });
    expect(second).toMatchObject({ id, attempts: 2 });

    // the slow worker finally finishes: neither its success nor its failure lands
    expect(
      await completeJobs(t.database.db, { workerId: "slow", jobs: [{ id, attempts: 1 }], now: later }),
    ).toEqual([]);
    expect(
      await failJob(t.database.db, {
        workerId: "slow",
        job: { id, attempts: 1 },
        now: later,
        error: "late",
        retryAt: null,
      }),
    ).toBe(false);
    // same worker id but an older attempt is fenced too
    expect(
      await completeJobs(t.database.db, { workerId: "fresh", jobs: [{ id, attempts: 1 }], now: later }),
    ).toEqual([]);
    let row = await jobRow(t.database, id);
    expect(row).toMatchObject({ status: "processing", locked_by: "fresh", attempts: 2, last_error: null });

    expect(
      await completeJobs(t.database.db, { workerId: "fresh", jobs: [{ id, attempts: 2 }], now: later }),
    ).toEqual([id]);
    row = await jobRow(t.database, id);
    expect(row).toMatchObject({ status: "succeeded", locked_by: null, locked_until: null });
    expect(row.finished_at?.getTime()).toBe(later.getTime());
  });

  test("release gives a run back without counting it, due at once", async () => {
    const job = kindFor("release");
    const { id } = await enqueue(t.database.db, ctx, job, {});
    const now = clock.now();
    await claimJobs(t.database.db, { workerId: "w", kinds: [job.kind], limit: 1, now });
    expect(await releaseJobs(t.database.db, { workerId: "other", jobs: [{ id, attempts: 1 }], now })).toEqual(
      [],
    );
    expect(await releaseJobs(t.database.db, { workerId: "w", jobs: [{ id, attempts: 1 }], now })).toEqual([
      id,
    ]);
    expect(await jobRow(t.database, id)).toMatchObject({
      status: "pending",
      attempts: 0,
      locked_by: null,
      locked_until: null,
    });
    const [again] = await claimJobs(t.database.db, { workerId: "w2", kinds: [job.kind], limit: 1, now });
    expect(again).toMatchObject({ id, attempts: 1 });
  });
});

describe("retry, dead and admin retry", () => {
  test("backoff doubles from the base, jitters within ±20% and stops at the cap", () => {
    const policy = DEFAULT_RETRY_POLICY;
    expect(retryDelayMs(1, policy, () => 0.5)).toBe(5_000);
    expect(retryDelayMs(2, policy, () => 0.5)).toBe(10_000);
    expect(retryDelayMs(4, policy, () => 0.5)).toBe(40_000);
    expect(retryDelayMs(3, policy, () => 0)).toBe(16_000);
    expect(retryDelayMs(3, policy, () => 1)).toBe(24_000);
    expect(retryDelayMs(30, policy, () => 1)).toBe(3_600_000);
    expect(retryDelayMs(30, policy, () => 0)).toBe(2_880_000);
  });

  test("a failed job waits for its retry time; a dead job can be retried by an admin", async () => {
    const job = kindFor("retry");
    const { id } = await enqueue(t.database.db, ctx, job, {}, { maxAttempts: 2 });
    const now = clock.now();
    await claimJobs(t.database.db, { workerId: "w", kinds: [job.kind], limit: 1, now });
    const retryAt = new Date(now.getTime() + 5_000);
    expect(
      await failJob(t.database.db, { workerId: "w", job: { id, attempts: 1 }, now, error: "boom", retryAt }),
    ).toBe(true);
    expect(await jobRow(t.database, id)).toMatchObject({ status: "failed", attempts: 1, last_error: "boom" });
    const claim = (at: Date) =>
      claimJobs(t.database.db, { workerId: "w", kinds: [job.kind], limit: 1, now: at });
    expect(await claim(new Date(retryAt.getTime() - 1))).toHaveLength(0);
    expect(await claim(retryAt)).toHaveLength(1);
    await failJob(t.database.db, {
      workerId: "w",
      job: { id, attempts: 2 },
      now: retryAt,
      error: "boom 2",
      retryAt: null,
    });
    expect(await jobRow(t.database, id)).toMatchObject({ status: "dead", attempts: 2, last_error: "boom 2" });
    expect(await claim(new Date(retryAt.getTime() + 3_600_000))).toHaveLength(0);

    await expect(
      retryDeadJob({ database: t.database, clock, logger: silent }, systemCtx("test"), { id: 999_999_999 }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
    const view = await retryDeadJob({ database: t.database, clock, logger: silent }, systemCtx("test"), {
      id: id,
    });
    expect(view).toMatchObject({ status: "pending", attempts: 0, finishedAt: null, lastError: "boom 2" });
    // not dead any more: a second retry is a conflict
    const again = retryDeadJob({ database: t.database, clock, logger: silent }, systemCtx("test"), {
      id: id,
    });
    await expect(again).rejects.toBeInstanceOf(AppError);
    await expect(again).rejects.toMatchObject({ code: "conflict" });
    expect(await claim(clock.now())).toHaveLength(1);
  });
});

describe("admin listing and pruning", () => {
  test("lists by status and kind, newest first, page by page", async () => {
    const job = kindFor("listing");
    const ids = await enqueueMany(
      t.database.db,
      ctx,
      Array.from({ length: 5 }, (_, n) => ({ job, payload: { n } })),
    );
    const [claimed] = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [job.kind],
      limit: 1,
      now: clock.now(),
    });
    const page1 = await listJobs(t, systemCtx("test"), { kind: job.kind, status: "pending", limit: 2 });
    expect(page1.items.map((j) => j.id)).toEqual(
      ids
        .filter((id) => id !== claimed?.id)
        .sort((a, b) => b - a)
        .slice(0, 2),
    );
    const page2 = await listJobs(t, systemCtx("test"), {
      kind: job.kind,
      status: "pending",
      limit: 2,
      cursor: page1.nextCursor ?? "",
    });
    expect(page2.items).toHaveLength(2);
    expect(page2.nextCursor).toBeNull();
    expect(new Set([...page1.items, ...page2.items].map((j) => j.id)).size).toBe(4);
    const processing = await listJobs(t, systemCtx("test"), { kind: job.kind, status: "processing" });
    expect(processing.items.map((j) => j.id)).toEqual([claimed?.id as number]);
    expect((await getJob(t, systemCtx("test"), { id: claimed?.id as number }))?.lockedBy).toBe("w");
  });

  test("lists unfinished jobs of kinds nobody has handled for a lease (after a release dropped them)", async () => {
    // its own database: the look-up is over every kind but the ones named
    const own = await createTestDatabase();
    try {
      const base = new Date("2032-01-01T00:00:00Z");
      const c = new ManualClock(base);
      const known = kindFor("kept");
      const dropped = kindFor("dropped");
      const later = kindFor("later");
      await enqueue(own.database.db, { clock: c }, known, {});
      await enqueue(own.database.db, { clock: c }, dropped, {});
      await enqueue(own.database.db, { clock: c }, dropped, {});
      await enqueue(
        own.database.db,
        { clock: c },
        later,
        {},
        { runAfter: new Date(base.getTime() + 86_400_000) },
      );
      // one of the dropped kind was being run by the old release when it stopped
      await claimJobs(own.database.db, { workerId: "old", kinds: [dropped.kind], limit: 1, now: base });
      // what the job loop asks: due (or lease ended) more than a lease ago
      const at = (ms: number) =>
        orphanedJobKinds(own.database.db, { kinds: [known.kind], before: new Date(ms - LEASE_MS) });
      expect(await at(base.getTime())).toEqual([]);
      // a lease later: the never-claimed one is overdue; the claimed one's lease has only just ended
      expect(await at(base.getTime() + LEASE_MS + 1)).toEqual([{ kind: dropped.kind, count: 1 }]);
      // two leases later both are; the known kind and the one due tomorrow never are
      expect(await at(base.getTime() + 2 * LEASE_MS + 1)).toEqual([{ kind: dropped.kind, count: 2 }]);
    } finally {
      await own.drop();
    }
  });

  test("prunes succeeded and dead jobs after their retention, keeps the rest", async () => {
    // its own database: pruning is not scoped by kind
    const own = await createTestDatabase();
    try {
      await pruneCase(own);
    } finally {
      await own.drop();
    }
  });
});

async function pruneCase(t: TestDatabase) {
  {
    const job = kindFor("prune");
    const base = new Date("2031-01-01T00:00:00Z");
    const c = new ManualClock(base);
    const [a, b, d, p] = await enqueueMany(
      t.database.db,
      { clock: c },
      Array.from({ length: 4 }, () => ({ job, payload: {} })),
    );
    const claimed = await claimJobs(t.database.db, { workerId: "w", kinds: [job.kind], limit: 3, now: base });
    expect(claimed).toHaveLength(3);
    const byId = new Set([a, b, d]);
    expect(claimed.every((x) => byId.has(x.id))).toBe(true);
    await completeJobs(t.database.db, { workerId: "w", jobs: [{ id: a as number, attempts: 1 }], now: base });
    await completeJobs(t.database.db, {
      workerId: "w",
      jobs: [{ id: b as number, attempts: 1 }],
      now: new Date(base.getTime() + 10 * 86_400_000),
    });
    await failJob(t.database.db, {
      workerId: "w",
      job: { id: d as number, attempts: 1 },
      now: base,
      error: "x",
      retryAt: null,
    });
    const pruned = await pruneJobs(t.database.db, {
      succeededBefore: new Date(base.getTime() + 7 * 86_400_000),
      deadBefore: new Date(base.getTime() - 1),
      batchSize: 1,
    });
    expect(pruned).toBe(1);
    expect(await getJob(t, systemCtx("test"), { id: a as number })).toBeNull();
    expect(await getJob(t, systemCtx("test"), { id: b as number })).not.toBeNull();
    expect(await getJob(t, systemCtx("test"), { id: d as number })).not.toBeNull();
    expect(await getJob(t, systemCtx("test"), { id: p as number })).not.toBeNull();
    await pruneJobs(t.database.db, { succeededBefore: base, deadBefore: new Date(base.getTime() + 1) });
    expect(await getJob(t, systemCtx("test"), { id: d as number })).toBeNull();
  }
}

describe("renewLeases (the heartbeat)", () => {
  test("moves the leases a worker still holds; says why it could not move the others", async () => {
    const job = defineJob("queue.renew", z.object({}), () => {});
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push((await enqueue(t.database.db, { clock }, job, {})).id);
    const claimed = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [job.kind],
      limit: 3,
      now: clock.now(),
    });
    expect(claimed).toHaveLength(3);
    const [held, canceled, takenOver] = ids as [number, number, number];
    await execute(
      t.database.db,
      sql`update background_jobs set status = 'canceled', locked_by = null where id = ${canceled}`,
    );
    // its lease expired and another worker claimed it: attempts 2, locked by "other"
    await execute(
      t.database.db,
      sql`update background_jobs set locked_by = 'other', attempts = 2 where id = ${takenOver}`,
    );
    const later = new Date(clock.now().getTime() + 60_000);
    const leases = claimed.map((c) => ({ id: c.id, attempts: c.attempts }));
    const renewed = await renewLeases(t.database.db, {
      workerId: "w",
      jobs: leases,
      now: later,
      leaseMs: 5_000,
    });
    expect(renewed).toEqual([
      { id: held, renewed: true, lockedUntil: new Date(later.getTime() + 5_000), status: "processing" },
      { id: canceled, renewed: false, lockedUntil: null, status: "canceled" },
      { id: takenOver, renewed: false, lockedUntil: null, status: "processing" },
    ]);
    expect((await jobRow(t.database, held)).locked_until).toEqual(new Date(later.getTime() + 5_000));
    expect((await jobRow(t.database, takenOver)).locked_by).toBe("other");
    expect(await renewLeases(t.database.db, { workerId: "w", jobs: [], now: later, leaseMs: 5_000 })).toEqual(
      [],
    );
  });
});
