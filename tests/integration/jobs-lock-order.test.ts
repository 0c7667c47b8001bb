import { afterAll, describe, expect, test } from "bun:test";
import { sql, TransactionRollbackError } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { type Database, type Executor, execute, openDatabase } from "../../src/db/client.ts";
import { describeDatabaseFailure } from "../../src/db/database-failure.ts";
import { cancelJob } from "../../src/jobs/admin/cancel-job.ts";
import { claimJobs, completeAndClaimJobs } from "../../src/jobs/claim.ts";
import { createCompleter } from "../../src/jobs/completer.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { enqueueFlow } from "../../src/jobs/enqueue-flow.ts";
import { recordResults } from "../../src/jobs/outcomes.ts";
import { pruneJobs, renewLeases } from "../../src/jobs/queue.ts";
import { jobKind } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

// Every interleaving below is set up statement by statement: a helper transaction holds one row,
// each party is started once the one before is seen waiting for a lock (pg_stat_activity), so the
// order is the same on every run; no sleeps. A deadlock would surface as 40P01 from one of them.

const t = useTestDatabase({ poolSize: 4 });
const clock = new ManualClock("2030-01-01T00:00:00Z");
const logger = createLogger({ level: "error", redactor: createRedactor([]), write: () => {} });
const flowDeps = (database: Database) => ({
  database,
  clock,
  logger,
  config: { settings: { BackgroundProcessing: { JobMaxAttempts: 10 } } },
});
const pools: Database[] = [];
afterAll(async () => {
  await Promise.allSettled(pools.map((p) => p.close()));
});
const step = jobKind("locks.step", z.object({ n: z.number() }));

/** A pool of one connection and that connection's backend pid. */
async function connection(): Promise<{ database: Database; pid: number }> {
  const database = await openDatabase(t.directUrl, { poolSize: 1 });
  pools.push(database);
  const [row] = await execute<{ pid: number }>(database.db, sql`select pg_backend_pid() as pid`);
  return { database, pid: row?.pid as number };
}

/** Resolves once backend `pid` waits for a lock. */
const waitsForLock = (pid: number, what: string) =>
  waitFor(
    async () => {
      const [row] = await execute<{ waiting: boolean }>(
        t.database.db,
        sql`select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = ${pid}`,
      );
      return row?.waiting === true;
    },
    { what },
  );

/**
 * A transaction on its own connection that runs `hold`, then keeps its locks until `release()`
 * (it rolls back: it changes nothing).
 */
async function holding(hold: (tx: Executor) => Promise<unknown>): Promise<{ release: () => Promise<void> }> {
  const { database } = await connection();
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let held = () => {};
  const ready = new Promise<void>((resolve) => {
    held = resolve;
  });
  const done = database.db
    .transaction(async (tx) => {
      await hold(tx);
      held();
      await released;
      tx.rollback();
    })
    .catch(() => {});
  await ready;
  return {
    release: async () => {
      release();
      await done;
    },
  };
}

/** Marks jobs `processing` under `worker`, attempt 1 (as a claim would). */
async function hold(ids: number[], worker: string): Promise<void> {
  await execute(
    t.database.db,
    sql`update background_jobs set status = 'processing', locked_by = ${worker}, attempts = 1,
          locked_until = ${new Date(clock.now().getTime() + 300_000).toISOString()}::timestamptz
        where id = any(${`{${ids.join(",")}}`}::bigint[])`,
  );
}

const states = (ids: number[]) =>
  execute<{ id: number; status: string; waiting_on: number }>(
    t.database.db,
    sql`select id::int as id, status, waiting_on from background_jobs
        where id = any(${`{${ids.join(",")}}`}::bigint[]) order by id`,
  );

/**
 * A flow of one job `next` depending on `parents`, in a transaction of the caller's: a deadlock
 * reaches the caller (40P01) instead of being tried again, so the lock order itself is tested.
 */
const flowOnce = (database: Database, parents: number[]) =>
  database.db.transaction((tx) =>
    enqueueFlow(
      flowDeps(database),
      { ...systemCtx("test"), tx },
      { jobs: [{ key: "next", kind: step, payload: { n: 3 }, dependsOn: parents }] },
    ),
  );

/**
 * The interleaving each deadlock test sets up: `start` on a connection of its own until it waits
 * for what `held` holds (`what`), then a flow naming `parents` (in id order) until it waits too,
 * then `held` released: both must finish, neither a 40P01 (`bothFulfilled`).
 */
async function againstFlow<A>(
  start: (database: Database) => Promise<A>,
  what: string,
  parents: number[],
  held: { release: () => Promise<void> },
) {
  const first = await connection();
  const started = start(first.database);
  await waitsForLock(first.pid, what);
  const enqueuer = await connection();
  const flow = flowOnce(enqueuer.database, parents);
  await waitsForLock(enqueuer.pid, "the flow waiting for a parent's row");
  await held.release();
  return bothFulfilled(started, flow);
}

/**
 * A flow whose child got the lower id (listed before its parent), the parent running on worker "w"
 * in a group slot, and that slot's row held by another transaction: the trigger that frees the slot
 * runs before the one that cancels the child, so whatever ends the parent waits on the slot first.
 */
async function childBeforeParentHoldingASlot(groupKey: string) {
  const first = await enqueueFlow(flowDeps(t.database), systemCtx("test"), {
    jobs: [
      { key: "child", kind: step, payload: { n: 1 }, dependsOn: ["parent"] },
      { key: "parent", kind: step, payload: { n: 2 } },
    ],
  });
  const child = first.jobs.child as number;
  const parent = first.jobs.parent as number;
  expect(child).toBeLessThan(parent);
  await hold([parent], "w");
  await execute(t.database.db, sql`update background_jobs set group_slot = 1 where id = ${parent}`);
  await execute(
    t.database.db,
    sql`insert into job_group_slots (kind, group_key, slot, job_id) values (${step.kind}, ${groupKey}, 1, ${parent})`,
  );
  const slotRow = await holding((tx) =>
    execute(tx, sql`select 1 from job_group_slots where job_id = ${parent} for update`),
  );
  return { child, parent, slotRow };
}

/** Both settled: a rejection (a 40P01) fails the test with its message. */
async function bothFulfilled<A, B>(a: Promise<A>, b: Promise<B>): Promise<[A, B]> {
  const [ra, rb] = await Promise.allSettled([a, b]);
  const failures = [ra, rb]
    .filter((r) => r.status === "rejected")
    .map((r) => {
      const failure = describeDatabaseFailure(r.reason);
      return `${failure.code}: ${failure.message}`;
    });
  expect(failures).toEqual([]);
  return [(ra as PromiseFulfilledResult<A>).value, (rb as PromiseFulfilledResult<B>).value];
}

describe("lock order: enqueueFlow against the completion of its parents", () => {
  test("a success whose child has the lower id, while a flow names both as parents", async () => {
    // the child listed first gets the lower id: the fan-in locks the parent, then the child
    const first = await enqueueFlow(flowDeps(t.database), systemCtx("test"), {
      jobs: [
        { key: "child", kind: step, payload: { n: 1 }, dependsOn: ["parent"] },
        { key: "parent", kind: step, payload: { n: 2 } },
      ],
    });
    const child = first.jobs.child as number;
    const parent = first.jobs.parent as number;
    expect(child).toBeLessThan(parent);
    await hold([parent], "w");

    // a transaction holds the parent's edge: the completion stops between its rows and the edge
    const edge = await holding((tx) =>
      execute(tx, sql`select 1 from job_dependencies where parent_id = ${parent} for update`),
    );
    // a flow names the child and the parent: it takes them in id order, child first
    const [recorded, flow] = await againstFlow(
      (database) =>
        recordResults(database.db, {
          workerId: "w",
          results: [{ id: parent, attempts: 1, hasDependents: true }],
          now: clock.now(),
        }),
      "the completion waiting for the edge",
      [child, parent],
      edge,
    );
    expect(recorded.recorded).toEqual([parent]);
    const next = flow.jobs.next as number;
    // the parent succeeded before the flow read it; the child became due and has not run
    expect(await states([child, parent, next])).toEqual([
      { id: child, status: "pending", waiting_on: 0 },
      { id: parent, status: "succeeded", waiting_on: 0 },
      { id: next, status: "waiting", waiting_on: 1 },
    ]);
  }, 30_000);

  test("a claim that carries a success, while a flow names the finished job and the claimed one", async () => {
    // `older` runs under w; `newer` is due and is what w's next claim takes
    const limited = jobKind("locks.limited", z.object({ n: z.number() }));
    const { id: older } = await enqueue(t.database.db, { clock }, step, { n: 1 });
    await hold([older], "w");
    const { id: newer } = await enqueue(t.database.db, { clock }, limited, { n: 2 });
    expect(older).toBeLessThan(newer);

    // a transaction holds the group slot the claim wants: the claim stops after it locked `newer`
    const slot = await holding((tx) =>
      execute(
        tx,
        sql`insert into job_group_slots (kind, group_key, slot, job_id) values (${limited.kind}, '', 1, ${older})`,
      ),
    );
    const [claimed, enqueued] = await againstFlow(
      (database) =>
        completeAndClaimJobs(database.db, {
          workerId: "w",
          kinds: [limited.kind],
          limit: 1,
          now: clock.now(),
          groupLimits: { [limited.kind]: 1 },
          complete: [{ id: older, attempts: 1 }],
        }),
      "the claim waiting for the group slot",
      [older, newer],
      slot,
    );
    expect(claimed.completed).toEqual([older]);
    expect(claimed.claimed.map((j) => j.id)).toEqual([newer]);
    const next = enqueued.jobs.next as number;
    expect(await states([older, newer, next])).toEqual([
      { id: older, status: "succeeded", waiting_on: 0 },
      { id: newer, status: "processing", waiting_on: 0 },
      { id: next, status: "waiting", waiting_on: 1 },
    ]);
  }, 30_000);
});

describe("lock order: a dead parent's children (the trigger) against enqueueFlow", () => {
  test("a dead result whose child has the lower id, while a flow names both as parents", async () => {
    const { child, parent, slotRow } = await childBeforeParentHoldingASlot("dead-path");
    const [recorded, flow] = await againstFlow(
      (database) =>
        recordResults(database.db, {
          workerId: "w",
          results: [{ id: parent, attempts: 1, status: "dead", error: "gave up", hasDependents: true }],
          now: clock.now(),
        }),
      "the completion waiting for the slot",
      [child, parent],
      slotRow,
    );
    expect(recorded.recorded).toEqual([parent]);
    const next = flow.jobs.next as number;
    expect(await states([child, parent, next])).toEqual([
      { id: child, status: "canceled", waiting_on: 1 },
      { id: parent, status: "dead", waiting_on: 0 },
      { id: next, status: "canceled", waiting_on: 2 },
    ]);
  }, 30_000);
});

describe("lock order: an admin cancel's children (the trigger) against enqueueFlow", () => {
  test("a cancel of a parent whose child has the lower id, while a flow names both as parents", async () => {
    const { child, parent, slotRow } = await childBeforeParentHoldingASlot("cancel-path");
    const [canceled, flow] = await againstFlow(
      (database) => cancelJob({ database, clock, logger }, systemCtx("test"), { id: parent }),
      "the cancel waiting for the slot",
      [child, parent],
      slotRow,
    );
    expect(canceled.status).toBe("canceled");
    const next = flow.jobs.next as number;
    expect(await states([child, parent, next])).toEqual([
      { id: child, status: "canceled", waiting_on: 1 },
      { id: parent, status: "canceled", waiting_on: 0 },
      { id: next, status: "canceled", waiting_on: 2 },
    ]);
  }, 30_000);
});

describe("lock order: the loser of a deadlock tries again", () => {
  /**
   * A transaction that locks `first`, waits until `between` resolves, then locks `second`; it
   * checks for deadlocks after 10 s, so the other party (1 s, the default) is always the victim.
   */
  async function crossing(first: number, second: number, between: () => Promise<unknown>) {
    const { database, pid } = await connection();
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let secondHeld = () => {};
    const holdsBoth = new Promise<void>((resolve) => {
      secondHeld = resolve;
    });
    const done = database.db
      .transaction(async (tx) => {
        await execute(tx, sql`set local deadlock_timeout = '10s'`);
        await execute(tx, sql`select 1 from background_jobs where id = ${first} for update`);
        await between();
        await execute(tx, sql`select 1 from background_jobs where id = ${second} for update`);
        secondHeld();
        await released;
        tx.rollback();
      })
      .catch(() => {});
    return {
      pid,
      holdsBoth,
      release: async () => {
        release();
        await done;
      },
    };
  }

  test("enqueueFlow, aborted to break a deadlock, enqueues its flow once on its next try", async () => {
    const { id: low } = await enqueue(t.database.db, { clock }, step, { n: 1 });
    const { id: high } = await enqueue(t.database.db, { clock }, step, { n: 2 });
    const enqueuer = await connection();
    let flow: ReturnType<typeof enqueueFlow> | undefined;
    // the other transaction holds `high`; the flow takes `low` and waits; then the other asks for `low`
    const other = await crossing(high, low, async () => {
      flow = enqueueFlow(flowDeps(enqueuer.database), systemCtx("test"), {
        jobs: [{ key: "next", kind: step, payload: { n: 3 }, dependsOn: [low, high] }],
      });
      await waitsForLock(enqueuer.pid, "the flow waiting for `high`");
    });
    // the flow was the victim; its second try waits for the other transaction, which now holds both
    await other.holdsBoth;
    await waitsForLock(enqueuer.pid, "the flow's second try waiting");
    await other.release();
    const { flowId, jobs } = await (flow as ReturnType<typeof enqueueFlow>);
    const stored = await execute<{ jobs: number; edges: number }>(
      t.database.db,
      sql`select (select count(*)::int from background_jobs where flow_id = ${flowId}::uuid) as jobs,
                 (select count(*)::int from job_dependencies where child_id = ${jobs.next as number}) as edges`,
    );
    expect(stored).toEqual([{ jobs: 1, edges: 2 }]);
  }, 30_000);

  test("the completer, its write aborted twice to break a deadlock, records the outcome once", async () => {
    const first = await enqueueFlow(flowDeps(t.database), systemCtx("test"), {
      jobs: [
        { key: "parent", kind: step, payload: { n: 1 } },
        { key: "child", kind: step, payload: { n: 2 }, dependsOn: ["parent"] },
      ],
    });
    const parent = first.jobs.parent as number;
    const child = first.jobs.child as number;
    await hold([parent], "w");
    const lines: string[] = [];
    const quiet = createLogger({ level: "warn", redactor: createRedactor([]), write: (l) => lines.push(l) });
    const loop = await connection();
    const completer = createCompleter(
      { db: loop.database.db, clock, logger: quiet },
      // written when the test says (flush), not on a timer
      { workerId: "w", eager: false, retryMs: 3_600_000 },
    );
    try {
      const outcome = completer.record({
        type: "dead",
        reason: "gave up",
        job: {
          id: parent,
          kind: step.kind,
          payload: { n: 1 },
          attempts: 1,
          maxAttempts: 1,
          lockedUntil: clock.now(),
          groupKey: null,
          priority: 0,
          hasDependents: true,
        },
      });
      for (let round = 0; round < 2; round++) {
        // the other transaction holds the child; the write takes the parent and waits for the child;
        // then the other asks for the parent: the write is the victim
        let write: Promise<boolean> | undefined;
        const other = await crossing(child, parent, async () => {
          write = completer.flush();
          await waitsForLock(loop.pid, "the write waiting for the child");
        });
        await other.holdsBoth;
        expect(await write).toBe(false);
        await other.release();
      }
      expect(await completer.flush()).toBe(true);
      expect(await outcome).toBe("dead");
    } finally {
      completer.close();
    }
    expect(lines.join("\n")).not.toContain("runs again after its lease");
    expect(await states([parent, child])).toEqual([
      { id: parent, status: "dead", waiting_on: 0 },
      { id: child, status: "canceled", waiting_on: 1 },
    ]);
  }, 30_000);
});

describe("lock order: multi-row writes take their rows in id order", () => {
  /** Two jobs running under w, lower id first. */
  async function running(): Promise<[number, number]> {
    const { id: low } = await enqueue(t.database.db, { clock }, step, { n: 1 });
    const { id: high } = await enqueue(t.database.db, { clock }, step, { n: 2 });
    await hold([low, high], "w");
    return [low, high];
  }

  /** Whether another transaction can lock `id` at once (false: someone holds it). */
  async function free(id: number): Promise<boolean> {
    const { database } = await connection();
    try {
      await database.db.transaction(async (tx) => {
        await execute(tx, sql`select 1 from background_jobs where id = ${id} for update nowait`);
        tx.rollback();
      });
      return true;
    } catch (error) {
      if (error instanceof TransactionRollbackError) return true;
      if (describeDatabaseFailure(error).code === "55P03") return false;
      throw error;
    }
  }

  test("a completion batch given its results highest id first waits for the lowest holding none", async () => {
    const [low, high] = await running();
    const lowRow = await holding((tx) =>
      execute(tx, sql`select 1 from background_jobs where id = ${low} for share`),
    );
    const completer = await connection();
    const completion = recordResults(completer.database.db, {
      workerId: "w",
      results: [
        { id: high, attempts: 1 },
        { id: low, attempts: 1 },
      ],
      now: clock.now(),
    });
    await waitsForLock(completer.pid, "the completion waiting for the lower row");
    expect(await free(high)).toBe(true);
    await lowRow.release();
    expect((await completion).recorded.sort((a, b) => a - b)).toEqual([low, high]);
  }, 30_000);

  test("a heartbeat given its runs highest id first waits for the lowest holding none", async () => {
    const [low, high] = await running();
    const lowRow = await holding((tx) =>
      execute(tx, sql`select 1 from background_jobs where id = ${low} for share`),
    );
    const heart = await connection();
    const renewal = renewLeases(heart.database.db, {
      workerId: "w",
      jobs: [
        { id: high, attempts: 1 },
        { id: low, attempts: 1 },
      ],
      now: clock.now(),
      leaseMs: 300_000,
    });
    await waitsForLock(heart.pid, "the heartbeat waiting for the lower row");
    expect(await free(high)).toBe(true);
    await lowRow.release();
    expect((await renewal).every((r) => r.renewed)).toBe(true);
  }, 30_000);

  test("a claim never waits on a row: it skips the one a flow holds", async () => {
    const { id } = await enqueue(t.database.db, { clock }, step, { n: 1 });
    const locked = await holding((tx) =>
      execute(tx, sql`select 1 from background_jobs where id = ${id} for update`),
    );
    const claimed = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [step.kind],
      limit: 5,
      now: clock.now(),
    });
    expect(claimed.map((j) => j.id)).not.toContain(id);
    await locked.release();
  });

  test("the pruner never waits on a row: it leaves the one a flow holds to a later round", async () => {
    const { id } = await enqueue(t.database.db, { clock }, step, { n: 1 });
    await execute(
      t.database.db,
      sql`update background_jobs set status = 'succeeded', finished_at = '2020-01-01T00:00:00Z' where id = ${id}`,
    );
    const prune = () =>
      pruneJobs(t.database.db, {
        succeededBefore: new Date("2021-01-01T00:00:00Z"),
        deadBefore: new Date("2021-01-01T00:00:00Z"),
      });
    const locked = await holding((tx) =>
      execute(tx, sql`select 1 from background_jobs where id = ${id} for update`),
    );
    expect(await prune()).toBe(0);
    await locked.release();
    expect(await prune()).toBe(1);
  });
});
