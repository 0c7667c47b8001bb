import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { systemClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { cancelJob } from "../../src/jobs/admin/cancel-job.ts";
import { getJob } from "../../src/jobs/admin/get-job.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";

/**
 * Cancellation, timeouts, heartbeats and progress with the job loop in real OS processes
 * (tests/fixtures/job-runner.ts): what a handler sees, what the row ends as, and how long it takes.
 */

// the kinds the runner has (same names and schemas)
const count = defineJob("e2e.count", z.object({ n: z.number() }), () => {});
const hang = defineJob("e2e.hang", z.object({}), () => {});
const watch = defineJob("e2e.watch", z.object({}), () => {});
const ignore = defineJob("e2e.ignore", z.object({ ms: z.number() }), () => {});
const timeout = defineJob("e2e.timeout", z.object({}), () => {});
const long = defineJob("e2e.long", z.object({ ms: z.number() }), () => {});

const children: Child[] = [];
const ctx = { clock: systemClock };
const admin = systemCtx("e2e-admin");

const t = useTestDatabase({ poolSize: 4 });
beforeAll(async () => {
  await execute(
    t.database.db,
    sql`create table e2e_runs (job_id bigint not null, kind text not null, pid int not null, attempt int not null,
          at timestamptz not null default clock_timestamp())`,
  );
  await execute(
    t.database.db,
    sql`create table e2e_events (job_id bigint not null, what text not null, detail text, pid int not null,
          at timestamptz not null default clock_timestamp(), signal_after_ms float8, signal_since_claim_ms float8,
          signaled_at timestamptz)`,
  );
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
});

const adminDeps = () => {
  const redactor = createRedactor([]);
  return {
    database: t.database,
    clock: systemClock,
    logger: createLogger({ level: "error", redactor, write: () => {} }),
  };
};

async function startRunner(settings: Record<string, string> = {}): Promise<Child> {
  const child = spawnBun(["tests/fixtures/job-runner.ts"], {
    DATABASE_URL: t.url,
    Logging__Level: "warn",
    Database__PoolSize: "3",
    BackgroundProcessing__JobPollSeconds: "1",
    ...settings,
  });
  children.push(child);
  await child.waitForLine((l) => l.includes('"ready":true'));
  return child;
}

async function runsOf(id: number) {
  return execute<{ pid: number; attempt: number; at: Date }>(
    t.database.db,
    sql`select pid, attempt, at from e2e_runs where job_id = ${id} order by at`,
  );
}

async function eventsOf(id: number) {
  return execute<{ what: string; detail: string | null; at: Date }>(
    t.database.db,
    sql`select what, detail, at from e2e_events where job_id = ${id} order by at`,
  );
}

async function dbNow(): Promise<number> {
  const [row] = await execute<{ now: Date }>(t.database.db, sql`select clock_timestamp() as now`);
  return new Date(row?.now as Date).getTime();
}

function summary(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  return `min ${sorted[0]} ms, median ${median} ms, max ${sorted.at(-1)} ms`;
}

const started = (id: number) =>
  waitFor(async () => (await runsOf(id)).length > 0, { timeoutMs: 15_000, what: `job ${id} to start` });

/** Cancels a running job; returns ms from the cancel to its handler's signal, as the database's clock saw them. */
async function cancelDelay(id: number): Promise<{ ms: number; reason: string | null }> {
  const before = await dbNow();
  const view = await cancelJob(adminDeps(), admin, { id });
  expect(view.status).toBe("canceled");
  const aborted = await waitFor(async () => (await eventsOf(id)).find((e) => e.what === "aborted"), {
    timeoutMs: 15_000,
    what: "the handler to see its signal",
  });
  return { ms: new Date(aborted.at).getTime() - before, reason: aborted.detail };
}

describe("cancellation across processes", () => {
  test("a canceled pending job never runs", async () => {
    const { id: canceledId } = await enqueue(t.database.db, ctx, count, { n: 1 });
    await cancelJob(adminDeps(), admin, { id: canceledId });
    await startRunner();
    // enqueued after it, due after it: once this one ran, the canceled one would have been claimed first
    const { id: markerId } = await enqueue(t.database.db, ctx, count, { n: 2 });
    await waitFor(async () => (await jobRow(t.database, markerId)).status === "succeeded", {
      what: "the marker job",
    });
    expect(await runsOf(canceledId)).toEqual([]);
    expect(await jobRow(t.database, canceledId)).toMatchObject({ status: "canceled", attempts: 0 });
  }, 30_000);

  test("a running job: its handler's signal fires at once (NOTIFY), the job ends canceled and is not run again", async () => {
    await startRunner();
    const delays: number[] = [];
    for (let i = 0; i < 10; i++) {
      const { id } = await enqueue(t.database.db, ctx, watch, {});
      await started(id);
      const { ms, reason } = await cancelDelay(id);
      expect(reason).toStartWith("JobCanceledError");
      delays.push(ms);
      // the handler threw its reason: nothing overwrote the cancel
      await waitFor(async () => (await jobRow(t.database, id)).locked_by === null, { what: "settled row" });
      expect(await jobRow(t.database, id)).toMatchObject({
        status: "canceled",
        attempts: 1,
        last_error: null,
      });
      expect(await runsOf(id)).toHaveLength(1);
    }
    console.log(`cancel → signal over NOTIFY, 10 runs: ${summary(delays)}`);
    expect(Math.max(...delays)).toBeLessThan(1_000);
  }, 60_000);

  test("without LISTEN the next heartbeat delivers the cancel (within a third of the lease)", async () => {
    await startRunner({ E2E_LISTEN: "0", E2E_LEASE_MS: "3000" });
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      const { id } = await enqueue(t.database.db, ctx, watch, {});
      await started(id);
      const { ms, reason } = await cancelDelay(id);
      // the cancel, not the lease timer (which would fire at 2.7 s and name the lease)
      expect(reason).toStartWith("JobCanceledError");
      delays.push(ms);
      expect((await jobRow(t.database, id)).status).toBe("canceled");
    }
    console.log(`cancel → signal by heartbeat (lease 3 s, heartbeat 1 s), 4 runs: ${summary(delays)}`);
    expect(Math.max(...delays)).toBeLessThan(2_500);
  }, 60_000);

  test("a handler that ignores the signal cannot record success afterwards", async () => {
    await startRunner();
    const { id } = await enqueue(t.database.db, ctx, ignore, { ms: 1_500 });
    await started(id);
    const canceled = await cancelJob(adminDeps(), admin, { id });
    await waitFor(async () => (await eventsOf(id)).some((e) => e.what === "returned"), {
      what: "the handler to return",
    });
    const events = await eventsOf(id);
    expect(events.map((e) => e.what)).toEqual(["aborted", "returned"]);
    // the loop records successes with its next statement: give it one
    const { id: markerId } = await enqueue(t.database.db, ctx, count, { n: 3 });
    await waitFor(async () => (await jobRow(t.database, markerId)).status === "succeeded", {
      what: "marker",
    });
    const row = await jobRow(t.database, id);
    expect(row).toMatchObject({ status: "canceled", attempts: 1 });
    expect(row.finished_at?.toISOString()).toBe(canceled.finishedAt as string);
  }, 30_000);
});

describe("timeoutMs", () => {
  test("the signal fires at the timeout, the attempt fails with the timeout named, and is retried later", async () => {
    await startRunner();
    const { id } = await enqueue(t.database.db, ctx, timeout, {}, { maxAttempts: 3 });
    await started(id);
    // the attempt is recorded at the signal, without waiting for the handler: await both
    const aborted = await waitFor(
      async () => {
        const events = await execute<{
          what: string;
          detail: string | null;
          after_ms: number;
          since_claim_ms: number;
          signaled_at: Date;
        }>(
          t.database.db,
          sql`select what, detail, signal_after_ms as after_ms, signal_since_claim_ms as since_claim_ms, signaled_at
              from e2e_events where job_id = ${id}`,
        );
        const [first] = events;
        return first && (await jobRow(t.database, id)).status === "failed" ? first : undefined;
      },
      { what: "the failed attempt and the handler's event" },
    );
    expect(aborted).toMatchObject({ what: "aborted", detail: expect.stringContaining("JobTimeoutError") });
    // timed by the runner (the database's clock would add each insert's wait). The timer is armed after
    // the claim and before the handler's first line: "not early" is checked from the claim (from the
    // handler's start, a pause before its first line looked like an early signal), "not late" from the start
    const afterMs = Math.round(aborted.after_ms);
    const sinceClaimMs = Math.round(aborted.since_claim_ms);
    console.log(
      `timeoutMs 300: signal ${afterMs} ms after the handler started, ${sinceClaimMs} ms after the claim`,
    );
    expect(sinceClaimMs).toBeGreaterThanOrEqual(300);
    expect(afterMs).toBeLessThan(1_500);
    const row = await jobRow(t.database, id);
    expect(row.attempts).toBe(1);
    expect(row.last_error).toContain('JobTimeoutError: job kind "e2e.timeout" timed out after 300 ms');
    // retry policy: 5 s ± 20 % after the failure, which is the signal (the runner's clock; ms rounding)
    const retryMs = row.run_after.getTime() - new Date(aborted.signaled_at).getTime();
    expect(retryMs).toBeGreaterThanOrEqual(3_950);
    expect(retryMs).toBeLessThanOrEqual(6_050);
  }, 30_000);
});

describe("heartbeats", () => {
  test("a job running for three leases is never taken over while its process lives; progress shows meanwhile", async () => {
    const settings = { E2E_LEASE_MS: "1500" };
    const a = await startRunner(settings);
    const { id } = await enqueue(t.database.db, ctx, long, { ms: 4_500 });
    await started(id);
    await startRunner(settings); // a second process polling every second the whole time
    const leases = new Set<number>();
    let progressSeen: unknown = null;
    await waitFor(
      async () => {
        const row = await jobRow(t.database, id);
        if (row.locked_until) leases.add(row.locked_until.getTime());
        const view = await getJob(adminDeps(), admin, { id });
        if (view?.progress) progressSeen = view.progress;
        return row.status === "succeeded";
      },
      { timeoutMs: 20_000, intervalMs: 100, what: "the long job to succeed" },
    );
    const runs = await runsOf(id);
    expect(runs).toHaveLength(1);
    expect(runs[0]?.pid).toBe(a.proc.pid as number);
    expect((await jobRow(t.database, id)).attempts).toBe(1);
    // claimed once, renewed about every 500 ms for 4.5 s
    expect(leases.size).toBeGreaterThanOrEqual(5);
    expect(progressSeen).toMatchObject({ of: 4_500 });
  }, 40_000);

  test("a SIGKILLed process's job is taken over a lease after its last renewal, not before", async () => {
    const settings = { E2E_LEASE_MS: "1500" };
    const victim = await startRunner(settings);
    const { id } = await enqueue(t.database.db, ctx, hang, {});
    await started(id);
    const first = (await jobRow(t.database, id)).locked_until?.getTime();
    await waitFor(async () => (await jobRow(t.database, id)).locked_until?.getTime() !== first, {
      what: "a renewal",
    });
    const survivor = await startRunner(settings);
    victim.proc.kill("SIGKILL");
    await victim.proc.exited;
    const lastLease = (await jobRow(t.database, id)).locked_until?.getTime() as number;
    await waitFor(async () => (await runsOf(id)).length === 2, { timeoutMs: 15_000, what: "the takeover" });
    const [, second] = await runsOf(id);
    expect(second?.pid).toBe(survivor.proc.pid as number);
    expect(second?.attempt).toBe(2);
    const takenAfterMs = new Date(second?.at as Date).getTime() - lastLease;
    console.log(`takeover ${takenAfterMs} ms after the last lease ended (poll 1 s)`);
    expect(takenAfterMs).toBeGreaterThan(-100); // the database clock as each host reads it: a few ms
    expect(takenAfterMs).toBeLessThan(3_000);
  }, 40_000);
});
