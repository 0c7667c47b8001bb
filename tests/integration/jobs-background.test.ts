import { afterAll, describe, expect, test } from "bun:test";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { getJob } from "../../src/jobs/admin/get-job.ts";
import { enqueue, enqueueContext } from "../../src/jobs/enqueue.ts";
import { createIntervalRunner } from "../../src/jobs/interval-runner.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { type Background, intervalLoop, type LoopName, startBackground } from "../../src/loops/background.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase();

const flags: Record<LoopName, string> = {
  jobs: "BackgroundProcessing:JobsEnabled",
  tenantDomains: "TenantDomains:Enabled",
  subscriptions: "SaasSubscriptions:Enabled",
  usageReconciliation: "FeatureUsageReconciliation:Enabled",
  schedules: "BackgroundProcessing:SchedulesEnabled",
};

/** Starts the background with counting stand-ins for the three loops other areas will add. */
async function start(settings: Record<string, string>, kind: string) {
  const ticks: Record<string, number> = { tenantDomains: 0, subscriptions: 0, usageReconciliation: 0 };
  const runs: string[] = [];
  const job = defineJob(kind, z.object({}), (_p, c) => {
    runs.push(String(c.id));
  });
  const deps = await testDeps(
    testConfig({ settings: { "BackgroundProcessing:JobPollSeconds": "1", ...settings } }),
    {
      database: t.database,
      clock: new ManualClock(),
    },
  );
  const factory = (name: "tenantDomains" | "subscriptions" | "usageReconciliation") => () =>
    intervalLoop(
      name,
      createIntervalRunner({
        name,
        intervalMs: 60_000,
        tick: async () => {
          ticks[name] = (ticks[name] ?? 0) + 1;
        },
      }),
    );
  const background = await startBackground(deps, {
    registry: createJobRegistry([job]),
    loops: {
      tenantDomains: factory("tenantDomains"),
      subscriptions: factory("subscriptions"),
      usageReconciliation: factory("usageReconciliation"),
    },
  });
  return { background, ticks, runs, job, deps };
}

describe("Enabled flags", () => {
  const cleanup: Background[] = [];
  afterAll(async () => {
    await Promise.all(cleanup.map((b) => b.stop(1_000)));
  });

  test("all four loops run by default", async () => {
    const { background, ticks, runs, job, deps } = await start({}, "bg.all");
    cleanup.push(background);
    expect(background.loops.map((l) => l.name as string).sort()).toEqual(
      ["jobs", "subscriptions", "tenantDomains", "usageReconciliation"].sort(),
    );
    const { id } = await enqueue(t.database.db, { clock: deps.clock }, job, {});
    await waitFor(() => runs.includes(String(id)), { what: "job run" });
    expect(ticks).toEqual({ tenantDomains: 1, subscriptions: 1, usageReconciliation: 1 });
    await background.stop(1_000);
  });

  test("BackgroundProcessing:Enabled=false switches off all four", async () => {
    const off = await start({ "BackgroundProcessing:Enabled": "false" }, "bg.master");
    cleanup.push(off.background);
    expect(off.background.loops).toEqual([]);
    expect(off.background.jobLoop).toBeNull();
    const { id } = await enqueue(t.database.db, { clock: off.deps.clock }, off.job, {});
    // a running process takes the job at once (the job was claimable all along); the switched-off one never ran it
    const on = await start({}, "bg.master");
    cleanup.push(on.background);
    await waitFor(() => on.runs.includes(String(id)), { what: "job run by the enabled process" });
    expect(off.runs).toEqual([]);
    expect(off.ticks).toEqual({ tenantDomains: 0, subscriptions: 0, usageReconciliation: 0 });
    // the handler ran; its completion commits just after
    const row = await waitFor(
      async () => {
        const current = await jobRow(t.database, id);
        return current.status === "succeeded" ? current : null;
      },
      { what: "the job to be recorded as succeeded" },
    );
    expect(row.locked_by).toBeNull();
    await on.background.stop(1_000);
  });

  for (const name of ["jobs", "tenantDomains", "subscriptions", "usageReconciliation"] as const) {
    test(`${flags[name]}=false stops only that loop`, async () => {
      const kind = `bg.flag-${name.toLowerCase()}`;
      const { background, ticks, runs, job, deps } = await start({ [flags[name]]: "false" }, kind);
      cleanup.push(background);
      const running = background.loops.map((l) => l.name);
      expect(running).not.toContain(name);
      expect(running).toHaveLength(3);
      if (name !== "jobs") expect(ticks[name]).toBe(0);
      const { id } = await enqueue(t.database.db, { clock: deps.clock }, job, {});
      if (name === "jobs") {
        expect(background.jobLoop).toBeNull();
        const other = await start({}, kind);
        cleanup.push(other.background);
        await waitFor(() => other.runs.includes(String(id)), { what: "job run elsewhere" });
        expect(runs).toEqual([]);
        await other.background.stop(1_000);
      } else {
        await waitFor(() => runs.includes(String(id)), { what: "job run" });
      }
      await background.stop(1_000);
    });
  }
});

test("a loop that fails to start stops the loops already started (the job loop among them), and the start rejects", async () => {
  const kind = "bg.failed-start";
  const runs: string[] = [];
  const job = defineJob(kind, z.object({}), (_p, c) => {
    runs.push(String(c.id));
  });
  const deps = await testDeps(testConfig({ settings: { "BackgroundProcessing:JobPollSeconds": "1" } }), {
    database: t.database,
    clock: new ManualClock(),
  });
  const stopped: string[] = [];
  const started = startBackground(deps, {
    registry: createJobRegistry([job]),
    loops: {
      tenantDomains: () => ({ name: "tenantDomains", stop: async () => void stopped.push("tenantDomains") }),
      subscriptions: () => {
        throw new Error("could not seed");
      },
    },
  });
  await expect(started).rejects.toThrow("could not seed");
  expect(stopped).toEqual(["tenantDomains"]);
  // no job loop was left claiming: a job enqueued now waits for a process that runs its kind
  const { id } = await enqueue(t.database.db, { clock: deps.clock }, job, {});
  const other = await start({}, kind);
  await waitFor(() => other.runs.includes(String(id)), { what: "job run by the process that started" });
  expect(runs).toEqual([]);
  await other.background.stop(1_000);
});

describe("configuration reaches the queue", () => {
  test("BackgroundProcessing:JobMaxAttempts is the default max_attempts of an enqueue", async () => {
    const deps = await testDeps(testConfig({ settings: { "BackgroundProcessing:JobMaxAttempts": "3" } }), {
      database: t.database,
    });
    const job = defineJob("bg.attempts", z.object({}), () => {});
    const { id } = await enqueue(t.database.db, enqueueContext(deps), job, {});
    expect((await jobRow(t.database, id)).max_attempts).toBe(3);
    const strict = defineJob("bg.attempts-kind", z.object({}), () => {}, { maxAttempts: 2 });
    const kindWins = await enqueue(t.database.db, enqueueContext(deps), strict, {});
    expect((await jobRow(t.database, kindWins.id)).max_attempts).toBe(2);
    const callWins = await enqueue(t.database.db, enqueueContext(deps), strict, {}, { maxAttempts: 7 });
    expect((await jobRow(t.database, callWins.id)).max_attempts).toBe(7);
  });

  test("the job loop prunes finished jobs after the configured retention", async () => {
    const clock = new ManualClock("2032-01-01T00:00:00Z");
    const job = defineJob("bg.prune", z.object({}), () => {});
    const deps = await testDeps(
      testConfig({
        settings: { "BackgroundProcessing:JobRetentionDays": "1", "TenantDomains:Enabled": "false" },
      }),
      { database: t.database, clock },
    );
    const first = await startBackground(deps, { registry: createJobRegistry([job]) });
    const { id } = await enqueue(t.database.db, enqueueContext(deps), job, {});
    await waitFor(async () => (await jobRow(t.database, id)).status === "succeeded", { what: "job done" });
    await first.stop(1_000);
    // two days later a new process starts; its pruner runs at start
    clock.advance(2 * 86_400_000);
    const pruned: number[] = [];
    const second = await startBackground(deps, {
      registry: createJobRegistry([job]),
      jobLoop: { onEvent: (e) => e.type === "pruned" && pruned.push(e.count) },
    });
    await waitFor(() => pruned.length > 0, { what: "prune" });
    expect(await getJob(t, systemCtx("test"), { id: id })).toBeNull();
    await second.stop(1_000);
  });
});
