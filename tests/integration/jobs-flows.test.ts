import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { type Database, execute } from "../../src/db/client.ts";
import { adminFlowRoutes } from "../../src/http/routes/admin-flows.ts";
import { adminJobRoutes } from "../../src/http/routes/admin-jobs.ts";
import { cancelFlow } from "../../src/jobs/admin/cancel-flow.ts";
import { getFlow } from "../../src/jobs/admin/get-flow.ts";
import { getJob } from "../../src/jobs/admin/get-job.ts";
import { retryDeadJob } from "../../src/jobs/admin/retry-job.ts";
import { completeAndClaimStatement } from "../../src/jobs/claim.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { enqueueFlow, InvalidFlowError } from "../../src/jobs/enqueue-flow.ts";
import { createJobLoop, type JobLoop } from "../../src/jobs/job-loop.ts";
import {
  createJobRegistry,
  defineJob,
  type JobDefinition,
  MAX_RESULT_BYTES,
} from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { platformAdminRoutes } from "../helpers/admin-routes.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/database.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase({ poolSize: 8 });
const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: () => {} });
const started: JobLoop[] = [];
const opened: Database[] = [];
afterAll(async () => {
  await Promise.allSettled(started.map((l) => l.stop(1_000)));
  await Promise.allSettled(opened.map((d) => d.close()));
});

const clock = new ManualClock();

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}
const ctx = systemCtx("test");
const deps = () => ({
  database: t.database,
  clock,
  logger,
  config: { settings: { BackgroundProcessing: { JobMaxAttempts: 10 } } },
});

function loop(
  definitions: JobDefinition[],
  options: { database?: Database; batchSize?: number } = {},
): JobLoop {
  const l = createJobLoop(
    { database: options.database ?? t.database, clock, logger, redactor },
    {
      registry: createJobRegistry(definitions),
      parallelism: 4,
      batchSize: options.batchSize ?? 5,
      pollMs: 50,
      retry: { baseMs: 0, maxMs: 0, jitter: 0 },
    },
  );
  started.push(l);
  return l;
}

async function stopAll(): Promise<void> {
  await Promise.all(started.splice(0).map((l) => l.stop(1_000)));
}

/** A kind whose runs are recorded in order; `fail` makes a run throw. */
function recorder(kind: string, fail: (payload: { n: number }) => boolean = () => false) {
  const ran: { id: number; n: number; parents: Record<string, unknown> }[] = [];
  const job = defineJob(
    kind,
    z.object({ n: z.number() }),
    async (payload, context) => {
      const parents = await context.parentResults();
      ran.push({ id: context.id, n: payload.n, parents });
      if (fail(payload)) throw new Error(`run ${payload.n} fails`);
      return { doubled: payload.n * 2 };
    },
    { maxAttempts: 1 },
  );
  return { job, ran };
}

describe("results", () => {
  test("a handler's return value is stored with the job, shown by the admin API, and read by a new process", async () => {
    const job = defineJob("results.echo", z.object({ text: z.string() }), (p) => ({
      echoed: p.text,
      at: new Date(0),
    }));
    const none = defineJob("results.none", z.object({}), () => {});
    const big = defineJob("results.big", z.object({}), () => "x".repeat(MAX_RESULT_BYTES), {
      maxAttempts: 1,
    });
    const { id } = await enqueue(t.database.db, { clock }, job, { text: "hi" });
    const { id: noneId } = await enqueue(t.database.db, { clock }, none, {});
    const { id: bigId } = await enqueue(t.database.db, { clock }, big, {});
    const l = loop([job, none, big]);
    await l.start();
    await waitFor(async () => (await jobRow(t.database, bigId)).status === "dead", {
      what: "the jobs to end",
    });
    await waitFor(async () => (await jobRow(t.database, noneId)).status === "succeeded");
    await stopAll();
    // another connection pool, as a restarted process would open
    const fresh = await openTestDatabase(t.url, { poolSize: 1 });
    opened.push(fresh);
    const shown = await getJob({ database: fresh }, ctx, { id });
    expect(shown?.status).toBe("succeeded");
    expect(shown?.result).toEqual({ echoed: "hi", at: "1970-01-01T00:00:00.000Z" });
    expect(shown?.dependsOn).toEqual([]);
    expect((await getJob({ database: fresh }, ctx, { id: noneId }))?.result).toBeNull();
    const tooBig = await getJob({ database: fresh }, ctx, { id: bigId });
    expect(tooBig?.result).toBeNull();
    expect(tooBig?.lastError).toContain(`at most ${MAX_RESULT_BYTES} are kept`);
  });
});

describe("flows", () => {
  test("a child runs only after every parent succeeded and reads their results", async () => {
    const { job, ran } = recorder("flows.step");
    const flow = await enqueueFlow(deps(), ctx, {
      jobs: [
        { key: "a", kind: job, payload: { n: 1 } },
        { key: "b", kind: job, payload: { n: 2 } },
        { key: "c", kind: job, payload: { n: 3 }, dependsOn: ["a", "b"] },
        { key: "d", kind: job, payload: { n: 4 }, dependsOn: ["c"] },
      ],
    });
    expect(Object.keys(flow.jobs).sort()).toEqual(["a", "b", "c", "d"]);
    expect((await jobRow(t.database, flow.jobs.c as number)).status).toBe("waiting");
    const l = loop([job]);
    await l.start();
    await waitFor(async () => (await jobRow(t.database, flow.jobs.d as number)).status === "succeeded", {
      what: "the flow to finish",
    });
    await stopAll();
    const order = ran.map((r) => r.n);
    expect(order.indexOf(3)).toBeGreaterThan(order.indexOf(1));
    expect(order.indexOf(3)).toBeGreaterThan(order.indexOf(2));
    expect(order.indexOf(4)).toBeGreaterThan(order.indexOf(3));
    expect(ran.find((r) => r.n === 3)?.parents).toEqual({ a: { doubled: 2 }, b: { doubled: 4 } });
    expect(ran.find((r) => r.n === 4)?.parents).toEqual({ c: { doubled: 6 } });
    const shown = await getJob({ database: t.database }, ctx, { id: flow.jobs.c as number });
    expect(shown?.flowId).toBe(flow.flowId);
    expect(shown?.dependsOn).toEqual([flow.jobs.a as number, flow.jobs.b as number]);
    const view = await getFlow({ database: t.database }, ctx, { flowId: flow.flowId });
    expect(view?.counts).toEqual({ succeeded: 4 });
    expect(view?.items.map((i) => i.flowKey)).toEqual(["a", "b", "c", "d"]);
  });

  test("a dead parent applies each child's policy: cancel, run, or wait for an admin", async () => {
    const { job, ran } = recorder("flows.policy", (p) => p.n === 0);
    const flow = await enqueueFlow(deps(), ctx, {
      jobs: [
        { key: "bad", kind: job, payload: { n: 0 } },
        { key: "cancel", kind: job, payload: { n: 1 }, dependsOn: ["bad"] },
        {
          key: "cancel-grandchild",
          kind: job,
          payload: { n: 11 },
          dependsOn: ["cancel"],
          onParentFailure: "run",
        },
        { key: "run", kind: job, payload: { n: 2 }, dependsOn: ["bad"], onParentFailure: "run" },
        { key: "wait", kind: job, payload: { n: 3 }, dependsOn: ["bad"], onParentFailure: "wait" },
      ],
    });
    const id = (key: string) => flow.jobs[key] as number;
    const l = loop([job]);
    await l.start();
    await waitFor(async () => (await jobRow(t.database, id("run"))).status === "succeeded", { what: "run" });
    await waitFor(async () => (await jobRow(t.database, id("cancel-grandchild"))).status === "succeeded");
    expect((await jobRow(t.database, id("bad"))).status).toBe("dead");
    const canceled = await jobRow(t.database, id("cancel"));
    expect(canceled.status).toBe("canceled");
    expect(canceled.last_error).toContain(`parent job ${id("bad")} ended dead`);
    const waiting = await jobRow(t.database, id("wait"));
    expect(waiting.status).toBe("waiting");
    expect(waiting.last_error).toContain("waiting for an administrator");
    expect(ran.filter((r) => r.n === 1 || r.n === 3)).toEqual([]);
    expect(ran.find((r) => r.n === 2)?.parents).toEqual({ bad: null });

    // the admin retries the parent; it succeeds this time and the waiting child runs
    await execute(
      t.database.db,
      sql`update background_jobs set payload = '{"n": 5}' where id = ${id("bad")}`,
    );
    await retryDeadJob({ database: t.database, clock, logger }, ctx, { id: id("bad") });
    await waitFor(async () => (await jobRow(t.database, id("wait"))).status === "succeeded", {
      what: "wait",
    });
    expect((await jobRow(t.database, id("cancel"))).status).toBe("canceled");
    await stopAll();
  });

  test("a parent named by id from outside the flow, and one that already ended", async () => {
    const { job, ran } = recorder("flows.outside");
    const { id: earlier } = await enqueue(t.database.db, { clock }, job, { n: 7 });
    const l = loop([job]);
    await l.start();
    await waitFor(async () => (await jobRow(t.database, earlier)).status === "succeeded");
    const { id: dead } = await enqueue(t.database.db, { clock }, job, { n: 8 });
    await execute(t.database.db, sql`update background_jobs set status = 'dead' where id = ${dead}`);
    const flow = await enqueueFlow(deps(), ctx, {
      jobs: [
        { key: "after-done", kind: job, payload: { n: 9 }, dependsOn: [earlier] },
        { key: "after-dead", kind: job, payload: { n: 10 }, dependsOn: [dead] },
        { key: "after-that", kind: job, payload: { n: 12 }, dependsOn: ["after-dead"] },
      ],
    });
    await waitFor(
      async () => (await jobRow(t.database, flow.jobs["after-done"] as number)).status === "succeeded",
    );
    await stopAll();
    expect(ran.find((r) => r.n === 9)?.parents).toEqual({ [String(earlier)]: { doubled: 14 } });
    expect((await jobRow(t.database, flow.jobs["after-dead"] as number)).status).toBe("canceled");
    expect((await jobRow(t.database, flow.jobs["after-that"] as number)).status).toBe("canceled");
  });

  test("cycles, unknown keys and ids, and repeated keys are refused and nothing is stored", async () => {
    const { job } = recorder("flows.refused");
    const refused = async (jobs: Parameters<typeof enqueueFlow>[2]["jobs"], message: RegExp) => {
      const before = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs`,
      );
      await expect(enqueueFlow(deps(), ctx, { jobs })).rejects.toThrow(message);
      await expect(enqueueFlow(deps(), ctx, { jobs })).rejects.toBeInstanceOf(InvalidFlowError);
      const after = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs`,
      );
      expect(after[0]?.n).toBe(before[0]?.n);
    };
    await refused(
      [
        { key: "a", kind: job, payload: { n: 1 }, dependsOn: ["c"] },
        { key: "b", kind: job, payload: { n: 1 }, dependsOn: ["a"] },
        { key: "c", kind: job, payload: { n: 1 }, dependsOn: ["b"] },
        { key: "d", kind: job, payload: { n: 1 } },
      ],
      /cycle/,
    );
    await refused([{ key: "a", kind: job, payload: { n: 1 }, dependsOn: ["a"] }], /itself/);
    await refused([{ key: "a", kind: job, payload: { n: 1 }, dependsOn: ["zz"] }], /not in the flow/);
    await refused([{ key: "a", kind: job, payload: { n: 1 }, dependsOn: [999_999_999] }], /no job with id/);
    await refused(
      [
        { key: "a", kind: job, payload: { n: 1 } },
        { key: "a", kind: job, payload: { n: 2 } },
      ],
      /given twice/,
    );
  });

  test("a flow is listed and canceled as a whole", async () => {
    const { job } = recorder("flows.canceled");
    const flow = await enqueueFlow(deps(), ctx, {
      jobs: [
        {
          key: "root",
          kind: job,
          payload: { n: 1 },
          options: { runAfter: new Date(clock.now().getTime() + 3_600_000) },
        },
        ...Array.from({ length: 5 }, (_, i) => ({
          key: `leaf-${i}`,
          kind: job,
          payload: { n: i },
          dependsOn: ["root"],
        })),
      ],
    });
    const page = await getFlow({ database: t.database }, ctx, { flowId: flow.flowId, limit: 4 });
    expect(page?.counts).toEqual({ pending: 1, waiting: 5 });
    expect(page?.items).toHaveLength(4);
    const rest = await getFlow({ database: t.database }, ctx, {
      flowId: flow.flowId,
      limit: 4,
      cursor: page?.nextCursor ?? "",
    });
    expect(rest?.items.map((i) => i.flowKey)).toEqual(["leaf-3", "leaf-4"]);
    expect(rest?.nextCursor).toBeNull();
    const { changed } = await cancelFlow({ database: t.database, clock, logger }, ctx, {
      flowId: flow.flowId,
    });
    expect(changed).toBeGreaterThanOrEqual(1);
    expect((await getFlow({ database: t.database }, ctx, { flowId: flow.flowId }))?.counts).toEqual({
      canceled: 6,
    });
    expect(
      await getFlow({ database: t.database }, ctx, { flowId: "00000000-0000-4000-8000-000000000000" }),
    ).toBeNull();
  });

  test("10,000 parents and one child: the flow completes and the claim cost stays flat", async () => {
    const { job, ran } = recorder("flows.wide");
    const width = 10_000;
    const flow = await enqueueFlow(deps(), ctx, {
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
    await execute(t.database.db, sql`analyze background_jobs`);
    await execute(t.database.db, sql`analyze job_dependencies`);
    const claimPlan = async (complete: { id: number; attempts: number; hasDependents: boolean }[]) => {
      const statement = completeAndClaimStatement({
        workerId: "plan",
        kinds: [job.kind],
        limit: 5,
        now: clock.now(),
        complete,
      });
      const [row] = await execute<{ "QUERY PLAN": [{ "Execution Time": number; Plan: unknown }] }>(
        t.database.db,
        sql`explain (analyze, format json) ${statement}`,
      );
      return row?.["QUERY PLAN"][0] as { "Execution Time": number; Plan: unknown };
    };
    // the first claim (nothing to record), then one that records those five parents' success
    const first = await claimPlan([]);
    // as the claim returned them: parents with dependents (their success brings the fan-in)
    const claimed = await execute<{ id: number; attempts: number; hasDependents: boolean }>(
      t.database.db,
      sql`select id::int as id, attempts, has_dependents as "hasDependents" from background_jobs where locked_by = 'plan'`,
    );
    expect(claimed.every((c) => c.hasDependents)).toBe(true);
    expect(claimed).toHaveLength(5);
    const early = await claimPlan(claimed);
    // the five the second claim took go back, for the loops below
    await execute(
      t.database.db,
      sql`update background_jobs set status = 'pending', locked_by = null, locked_until = null, attempts = 0
          where locked_by = 'plan' and status = 'processing'`,
    );
    for (const plan of [first, early]) expect(JSON.stringify(plan.Plan)).not.toContain("Seq Scan");
    // the claim never reads the edges; recording successes resolves the finished parents' edges
    // only, by primary key, and counts each child down once (src/jobs/outcomes.ts)
    expect(JSON.stringify(first.Plan)).not.toContain("job_dependencies");
    const edgeReads = (node: PlanNode): PlanNode[] => [
      ...(node["Relation Name"] === "job_dependencies" && node["Node Type"] !== "ModifyTable" ? [node] : []),
      ...(node.Plans ?? []).flatMap(edgeReads),
    ];
    const reads = edgeReads(early.Plan as PlanNode);
    expect(reads.length).toBeGreaterThan(0);
    for (const read of reads) expect(read["Index Name"]).toBe("job_dependencies_parent_id_child_id_pk");
    const l1 = loop([job], { batchSize: 50 });
    const second = await openTestDatabase(t.url, { poolSize: 3 });
    opened.push(second);
    const l2 = loop([job], { database: second, batchSize: 50 });
    await Promise.all([l1.start(), l2.start()]);
    const sinkId = flow.jobs.sink as number;
    await waitFor(async () => (await jobRow(t.database, sinkId)).status === "succeeded", {
      timeoutMs: 120_000,
      intervalMs: 100,
      what: "the sink to run",
    });
    await stopAll();
    expect(ran.filter((r) => r.n >= 0)).toHaveLength(width - 5);
    expect(ran.at(-1)?.n).toBe(-1);
    expect(Object.keys(ran.at(-1)?.parents ?? {})).toHaveLength(width);
    // the same claim with the backlog gone: still index scans, and no slower than at the start
    await execute(
      t.database.db,
      sql`insert into background_jobs (kind, payload) select ${job.kind}, '{"n": 0}' from generate_series(1, 5)`,
    );
    const late = await claimPlan([]);
    expect(JSON.stringify(late.Plan)).not.toContain("Seq Scan");
    expect(late["Execution Time"]).toBeLessThan(Math.max(20, first["Execution Time"] * 3));
  }, 180_000);
});

describe("admin flow routes", () => {
  test("GET /api/admin/jobs/{id} shows result, dependsOn and flowId; a flow is shown and canceled over HTTP", async () => {
    const appDeps = await testDeps(testConfig(), { database: t.database, clock });
    const app = platformAdminRoutes(appDeps, adminJobRoutes(appDeps), adminFlowRoutes(appDeps));
    const { job } = recorder("flows.http");
    const flow = await enqueueFlow(deps(), ctx, {
      jobs: [
        { key: "first", kind: job, payload: { n: 1 } },
        {
          key: "second",
          kind: job,
          payload: { n: 2 },
          dependsOn: ["first"],
          onParentFailure: "wait",
          options: { runAfter: new Date(clock.now().getTime() + 3_600_000) },
        },
      ],
    });
    const l = loop([job]);
    await l.start();
    await waitFor(async () => (await jobRow(t.database, flow.jobs.first as number)).status === "succeeded");
    await stopAll();
    // the second one is released but not due (runAfter): pending for the cancel below
    const shown = await app.request(`/api/admin/jobs/${flow.jobs.second}`);
    expect(shown.status).toBe(200);
    const body = (await shown.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      status: "pending",
      flowId: flow.flowId,
      flowKey: "second",
      dependsOn: [flow.jobs.first],
      onParentFailure: "wait",
      waitingOn: 0,
      result: null,
    });
    const parent = (await (await app.request(`/api/admin/jobs/${flow.jobs.first}`)).json()) as {
      result: unknown;
    };
    expect(parent.result).toEqual({ doubled: 2 });
    const view = await app.request(`/api/admin/flows/${flow.flowId}`);
    expect(view.status).toBe(200);
    expect(await view.json()).toMatchObject({
      flowId: flow.flowId,
      total: 2,
      counts: { succeeded: 1, pending: 1 },
    });
    const canceled = await app.request(`/api/admin/flows/${flow.flowId}/cancel`, { method: "POST" });
    expect(canceled.status).toBe(200);
    expect(await canceled.json()).toEqual({ changed: 1 });
    expect((await app.request("/api/admin/flows/00000000-0000-4000-8000-000000000000")).status).toBe(404);
    expect((await app.request("/api/admin/flows/not-a-flow")).status).toBe(400);
    expect(
      (await app.request("/api/admin/flows/00000000-0000-4000-8000-000000000000/cancel", { method: "POST" }))
        .status,
    ).toBe(404);
  });
});
