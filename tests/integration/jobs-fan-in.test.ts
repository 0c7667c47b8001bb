import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import { claimJobs, completeAndClaimJobs, completeAndClaimStatement } from "../../src/jobs/claim.ts";
import { createCompleter } from "../../src/jobs/completer.ts";
import { enqueue, JOBS_CHANNEL } from "../../src/jobs/enqueue.ts";
import { enqueueFlow } from "../../src/jobs/enqueue-flow.ts";
import { recordResults } from "../../src/jobs/outcomes.ts";
import { jobKind } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase({ poolSize: 4 });
const clock = new ManualClock("2030-01-01T00:00:00Z");
const logger = createLogger({ level: "error", redactor: createRedactor([]), write: () => {} });
const deps = () => ({
  database: t.database,
  clock,
  logger,
  config: { settings: { BackgroundProcessing: { JobMaxAttempts: 10 } } },
});
const pools: Database[] = [];
afterAll(async () => {
  await Promise.allSettled(pools.map((p) => p.close()));
});
const job = jobKind("fanin.step", z.object({ n: z.number() }));

/** Marks the flow's parents `processing`, held by `worker(key)` with attempt 1 (as a claim would). */
async function hold(ids: Record<string, number>, worker: (key: string) => string | null): Promise<void> {
  const rows = Object.entries(ids)
    .map(([key, id]) => ({ id, worker: worker(key) }))
    .filter((r) => r.worker !== null);
  await execute(
    t.database.db,
    sql`update background_jobs j set status = 'processing', locked_by = r.worker, attempts = 1,
          locked_until = ${new Date(clock.now().getTime() + 300_000).toISOString()}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r(id bigint, worker text)
        where j.id = r.id`,
  );
}

const childState = (ids: number[]) =>
  execute<{ id: number; status: string; waiting_on: number }>(
    t.database.db,
    sql`select id::int as id, status, waiting_on from background_jobs
        where id = any(${`{${ids.join(",")}}`}::bigint[]) order by id`,
  );

describe("fan-in", () => {
  test("500 parents finished in one statement update their child once, not once per parent", async () => {
    const width = 500;
    const flow = await enqueueFlow(deps(), systemCtx("test"), {
      jobs: [
        ...Array.from({ length: width }, (_, n) => ({ key: `p${n}`, kind: job, payload: { n } })),
        {
          key: "sink",
          kind: job,
          payload: { n: -1 },
          dependsOn: Array.from({ length: width }, (_, n) => `p${n}`),
        },
      ],
    });
    await hold(flow.jobs, (key) => (key === "sink" ? null : "w"));
    const parents = Object.entries(flow.jobs)
      .filter(([key]) => key !== "sink")
      .map(([, id]) => ({ id, attempts: 1 }));
    const updates = await t.database.db.transaction(async (tx) => {
      // rows this backend updated in background_jobs (the counters may still hold an earlier
      // transaction's, not yet flushed: the difference is this statement's)
      const counted = async () => {
        const [stats] = await execute<{ n: number }>(
          tx,
          sql`select n_tup_upd::int as n from pg_stat_xact_user_tables where relname = 'background_jobs'`,
        );
        return stats?.n ?? 0;
      };
      const before = await counted();
      const { recorded } = await recordResults(tx, { workerId: "w", results: parents, now: clock.now() });
      expect(recorded).toHaveLength(width);
      return (await counted()) - before;
    });
    // the parents, and the child once
    expect(updates).toBe(width + 1);
    const [sink] = await childState([flow.jobs.sink as number]);
    expect(sink).toMatchObject({ status: "pending", waiting_on: 0 });
  });

  test("a child that becomes due wakes the loops (NOTIFY), as an enqueue does", async () => {
    const flow = await enqueueFlow(deps(), systemCtx("test"), {
      jobs: [
        { key: "a", kind: job, payload: { n: 1 } },
        { key: "b", kind: job, payload: { n: 2 }, dependsOn: ["a"] },
      ],
    });
    await hold(flow.jobs, (key) => (key === "a" ? "w" : null));
    let notified = 0;
    const unlisten = await t.database.listen(JOBS_CHANNEL, () => notified++);
    try {
      await recordResults(t.database.db, {
        workerId: "w",
        results: [{ id: flow.jobs.a as number, attempts: 1 }],
        now: clock.now(),
      });
      await waitFor(() => notified > 0, { what: "the NOTIFY of the child's wake-up" });
    } finally {
      await unlisten();
    }
  });

  test("two workers finishing parents of shared children in opposite orders never deadlock", async () => {
    const children = 10;
    const rounds = 12;
    // child c has 2 × rounds parents: a-side ones held by worker A, b-side ones by worker B
    const jobs = [];
    for (let c = 0; c < children; c++) {
      const parents = [];
      for (let r = 0; r < rounds; r++)
        for (const side of ["a", "b"]) {
          const key = `p${c}-${side}-${r}`;
          parents.push(key);
          jobs.push({ key, kind: job, payload: { n: r } });
        }
      jobs.push({ key: `c${c}`, kind: job, payload: { n: -1 }, dependsOn: parents });
    }
    const flow = await enqueueFlow(deps(), systemCtx("test"), { jobs });
    await hold(flow.jobs, (key) => (key.startsWith("c") ? null : key.includes("-a-") ? "A" : "B"));
    const a = await openDatabase(t.url, { poolSize: 1 });
    const b = await openDatabase(t.url, { poolSize: 1 });
    pools.push(a, b);
    const childIds = Array.from({ length: children }, (_, c) => flow.jobs[`c${c}`] as number);
    const lease = (key: string) => ({ id: flow.jobs[key] as number, attempts: 1 });
    for (let r = 0; r < rounds; r++) {
      // A finishes its parent of every child in ascending child order, B in descending, at once
      const ascending = Array.from({ length: children }, (_, c) => lease(`p${c}-a-${r}`));
      const descending = Array.from({ length: children }, (_, c) => lease(`p${children - 1 - c}-b-${r}`));
      const [byA, byB] = await Promise.all([
        recordResults(a.db, { workerId: "A", results: ascending, now: clock.now() }),
        recordResults(b.db, { workerId: "B", results: descending, now: clock.now() }),
      ]);
      expect(byA.recorded).toHaveLength(children);
      expect(byB.recorded).toHaveLength(children);
      const state = await childState(childIds);
      const left = 2 * (rounds - r - 1);
      for (const child of state)
        expect(child).toMatchObject({ status: left === 0 ? "pending" : "waiting", waiting_on: left });
    }
  }, 60_000);
});

describe("fan-in only where a finished job has dependents (issue #35)", () => {
  const text = (complete: Parameters<typeof completeAndClaimStatement>[0]["complete"]) =>
    new PgDialect().sqlToQuery(
      completeAndClaimStatement({
        workerId: "w",
        kinds: ["fanin.step"],
        limit: 5,
        now: clock.now(),
        complete,
      }),
    ).sql;

  test("a batch of plain successes is recorded without the fan-in; one claimed with dependents brings it", () => {
    const plain = text([
      { id: 1, attempts: 1 },
      { id: 2, attempts: 1, status: "dead", error: "x" },
    ]);
    expect(plain).toContain("update background_jobs j");
    expect(plain).not.toContain("job_dependencies");
    expect(plain).toContain("not j.has_dependents");
    const parent = text([
      { id: 1, attempts: 1 },
      { id: 3, attempts: 1, hasDependents: true },
    ]);
    expect(parent).toContain("update job_dependencies");
    expect(parent).toContain("j.xmin");
  });

  test("a child attached while its parent runs is counted down when the parent's success rides on a claim", async () => {
    const lone = jobKind("fanin.lone", z.object({ n: z.number() }));
    const { id: parent } = await enqueue(t.database.db, { clock }, lone, { n: 1 });
    const [claimed] = await claimJobs(t.database.db, {
      workerId: "w",
      kinds: [lone.kind],
      limit: 1,
      now: clock.now(),
    });
    expect(claimed).toMatchObject({ id: parent, hasDependents: false });
    // while it runs, a flow names it as a parent
    const flow = await enqueueFlow(deps(), systemCtx("test"), {
      jobs: [{ key: "late", kind: job, payload: { n: 2 }, dependsOn: [parent] }],
    });
    const child = flow.jobs.late as number;
    expect((await childState([child]))[0]).toMatchObject({ status: "waiting", waiting_on: 1 });

    const completer = createCompleter({ db: t.database.db, clock, logger }, { workerId: "w", eager: false });
    try {
      const outcome = completer.record({
        type: "succeeded",
        job: claimed as NonNullable<typeof claimed>,
        startedAt: 0,
      });
      const carried = completer.take();
      if (!carried) throw new Error("nothing to carry");
      expect(carried.results).toEqual([{ id: parent, attempts: 1 }]);
      // the claim's statement, built without the fan-in, finds the row with dependents and leaves it
      const cycle = await completeAndClaimJobs(t.database.db, {
        workerId: "w",
        kinds: ["fanin.none"],
        limit: 1,
        now: clock.now(),
        complete: carried.results,
      });
      expect(cycle.completed).toEqual([]);
      expect((await childState([parent]))[0]?.status).toBe("processing");
      // the completer writes it again with the fan-in
      completer.settle(carried, cycle.completed);
      expect(await outcome).toBe("succeeded");
    } finally {
      completer.close();
    }
    expect(await childState([parent, child])).toEqual([
      { id: parent, status: "succeeded", waiting_on: 0 },
      { id: child, status: "pending", waiting_on: 0 },
    ]);
  });

  test("children attached while the completion waits for the parent's row are counted down too", async () => {
    const flow = await enqueueFlow(deps(), systemCtx("test"), {
      jobs: [
        { key: "a", kind: job, payload: { n: 1 } },
        { key: "b", kind: job, payload: { n: 2 }, dependsOn: ["a"] },
      ],
    });
    await hold(flow.jobs, (key) => (key === "a" ? "w" : null));
    const a = flow.jobs.a as number;
    const other = await openDatabase(t.url, { poolSize: 1 });
    pools.push(other);
    let completion: ReturnType<typeof recordResults> | undefined;
    const late = await t.database.db.transaction(async (tx) => {
      // a second flow names `a` as a parent and holds its row until it commits
      const second = await enqueueFlow(
        deps(),
        { ...systemCtx("test"), tx },
        {
          jobs: [{ key: "late", kind: job, payload: { n: 3 }, dependsOn: [a] }],
        },
      );
      completion = recordResults(other.db, {
        workerId: "w",
        results: [{ id: a, attempts: 1, hasDependents: true }],
        now: clock.now(),
      });
      // the completion has its snapshot (without the new edge) and waits for the row
      await waitFor(
        async () => {
          const [row] = await execute<{ n: number }>(
            t.database.db,
            sql`select count(*)::int as n from pg_stat_activity
                where datname = current_database() and wait_event_type = 'Lock' and query like '%update background_jobs j%'`,
          );
          return (row?.n ?? 0) > 0;
        },
        { what: "the completion waiting for the parent's row" },
      );
      return second.jobs.late as number;
    });
    expect((await (completion as ReturnType<typeof recordResults>)).recorded).toEqual([a]);
    expect(await childState([a, flow.jobs.b as number, late])).toEqual([
      { id: a, status: "succeeded", waiting_on: 0 },
      { id: flow.jobs.b as number, status: "pending", waiting_on: 0 },
      { id: late, status: "pending", waiting_on: 0 },
    ]);
  });
});
