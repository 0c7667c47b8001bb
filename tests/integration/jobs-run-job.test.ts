import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { claimJobs } from "../../src/jobs/claim.ts";
import { createCompleter, type RunEvent } from "../../src/jobs/completer.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import type { ClaimedJob } from "../../src/jobs/queue.ts";
import {
  createJobRegistry,
  defineJob,
  JobCanceledError,
  type JobDefinition,
  JobTimeoutError,
} from "../../src/jobs/registry.ts";
import { type RunJobInput, runJob, startJob } from "../../src/jobs/run-job.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";

/** One job at a time, without the loop: claimed by hand, then `runJob`. */
let t: TestDatabase;
const SECRET = "sk_live_run_job_secret_42";
const clock = new ManualClock("2026-11-10T12:00:00Z");
const WORKER = "run-job-test";

beforeAll(async () => {
  t = await createTestDatabase();
}, 60_000);
afterAll(() => t.drop());

function harness() {
  const events: (RunEvent | { type: "released"; ids: number[] })[] = [];
  const logs: Record<string, unknown>[] = [];
  const redactor = createRedactor([SECRET]);
  const deps: Parameters<typeof runJob>[0] = {
    db: t.database.db,
    clock,
    logger: createLogger({ level: "debug", redactor, write: (l) => logs.push(JSON.parse(l)) }),
    redactor,
    emit: (e) => events.push(e),
  };
  return { deps, events, logs };
}

async function claim(definition: JobDefinition, options: { maxAttempts?: number; leaseMs?: number } = {}) {
  const { id } = await enqueue(
    t.database.db,
    { clock },
    definition,
    {},
    { maxAttempts: options.maxAttempts },
  );
  const [job] = await claimJobs(t.database.db, {
    workerId: WORKER,
    kinds: [definition.kind],
    limit: 1,
    now: clock.now(),
    leaseMs: options.leaseMs,
  });
  if (!job || job.id !== id) throw new Error("the job was not claimed");
  return job;
}

const input = (
  job: ClaimedJob,
  definitions: JobDefinition[],
  extra: Partial<RunJobInput> = {},
): RunJobInput => ({
  job,
  workerId: WORKER,
  registry: createJobRegistry(definitions),
  retry: { baseMs: 5_000, maxMs: 60_000, jitter: 0.2 },
  random: () => 0.5, // no jitter
  ...extra,
});

let n = 0;
const kind = (name: string) => `test.run-job-${name}-${++n}`;

describe("runJob", () => {
  test("a handler that returns: the run is recorded succeeded, fenced on its lease", async () => {
    const { deps, events } = harness();
    const seen: unknown[] = [];
    const ok = defineJob(kind("ok"), z.object({}), (payload, c) => {
      seen.push({ payload, attempt: c.attempt, aborted: c.signal.aborted });
    });
    const job = await claim(ok);
    let handled = false;
    const running = startJob(deps, input(job, [ok]));
    void running.handled.then(() => (handled = true));
    const outcome = await createCompleter(deps, { workerId: WORKER }).record(await running.outcome);
    expect(outcome).toBe("succeeded");
    expect(handled).toBe(true);
    expect(seen).toEqual([{ payload: {}, attempt: 1, aborted: false }]);
    const row = await jobRow(t.database, job.id);
    expect(row).toMatchObject({ status: "succeeded", locked_by: null });
    expect(row.finished_at).not.toBeNull();
    expect(events).toMatchObject([{ type: "succeeded", id: job.id, kind: ok.kind, attempt: 1 }]);
  });

  test("the run decides its outcome and writes nothing: the success is handed to the completer", async () => {
    const { deps } = harness();
    const ok = defineJob(kind("handoff"), z.object({}), () => {});
    const job = await claim(ok);
    const outcome = await startJob(deps, input(job, [ok])).outcome;
    expect(outcome.type).toBe("succeeded");
    expect({ id: outcome.job.id, attempts: outcome.job.attempts }).toEqual({ id: job.id, attempts: 1 });
    expect((await jobRow(t.database, job.id)).status).toBe("processing");
  });

  test("a failing handler with attempts left: failed, retried after the backoff, error redacted", async () => {
    const { deps, events, logs } = harness();
    const failing = defineJob(kind("fail"), z.object({}), () => {
      throw new Error(`upstream refused ${SECRET}`);
    });
    const job = await claim(failing, { maxAttempts: 3 });
    expect(await runJob(deps, input(job, [failing]))).toBe("failed");
    const row = await jobRow(t.database, job.id);
    expect(row).toMatchObject({ status: "failed", attempts: 1, locked_by: null });
    expect(row.run_after.getTime()).toBe(clock.now().getTime() + 5_000);
    expect(row.last_error).toContain("upstream refused");
    expect(row.last_error).not.toContain(SECRET);
    expect(events).toMatchObject([{ type: "failed", id: job.id, attempt: 1 }]);
    expect(logs.find((l) => l.msg === "job failed; will retry")).toMatchObject({ jobId: job.id, attempt: 1 });
  });

  test("a failing handler on its last attempt: dead", async () => {
    const { deps, events, logs } = harness();
    const failing = defineJob(kind("last"), z.object({}), () => {
      throw new Error("still failing");
    });
    const job = await claim(failing, { maxAttempts: 1 });
    expect(await runJob(deps, input(job, [failing]))).toBe("dead");
    expect(await jobRow(t.database, job.id)).toMatchObject({ status: "dead", locked_by: null });
    expect(events).toMatchObject([{ type: "dead", id: job.id }]);
    expect(logs.find((l) => l.msg === "job is dead")).toMatchObject({ level: "error", jobId: job.id });
  });

  test("a payload that does not match the schema is dead without calling the handler", async () => {
    const { deps } = harness();
    let called = false;
    const typed = defineJob(kind("schema"), z.object({ n: z.number().optional() }), () => {
      called = true;
    });
    const job = await claim(typed);
    await execute(t.database.db, sql`update background_jobs set payload = '{"n":"x"}' where id = ${job.id}`);
    expect(await runJob(deps, input({ ...job, payload: { n: "x" } }, [typed]))).toBe("dead");
    expect(called).toBe(false);
    const row = await jobRow(t.database, job.id);
    expect(row.status).toBe("dead");
    expect(row.last_error).toContain(`payload does not match the schema of job kind "${typed.kind}"`);
  });

  test("a run past its last attempt (the process running it died) is dead", async () => {
    const { deps } = harness();
    const job = defineJob(kind("expired"), z.object({}), () => {});
    await claim(job, { maxAttempts: 1, leaseMs: 1 });
    clock.advance(1_000);
    const [again] = await claimJobs(t.database.db, {
      workerId: WORKER,
      kinds: [job.kind],
      limit: 1,
      now: clock.now(),
    });
    expect(again?.attempts).toBe(2);
    expect(await runJob(deps, input(again as ClaimedJob, [job]))).toBe("dead");
    expect((await jobRow(t.database, (again as ClaimedJob).id)).last_error).toBe(
      "the lease of attempt 1 of 1 expired: the process running it stopped",
    );
  });

  test("a run whose lease another worker holds is lost: nothing recorded, a warning", async () => {
    const { deps, events, logs } = harness();
    const ok = defineJob(kind("lost"), z.object({}), () => {});
    const job = await claim(ok);
    await execute(
      t.database.db,
      sql`update background_jobs set locked_by = 'someone-else' where id = ${job.id}`,
    );
    expect(await runJob(deps, input(job, [ok]))).toBe("lost");
    expect(await jobRow(t.database, job.id)).toMatchObject({
      status: "processing",
      locked_by: "someone-else",
    });
    expect(events).toMatchObject([{ type: "lost", id: job.id }]);
    expect(logs.some((l) => l.msg === "job lease was taken over; result not recorded")).toBe(true);
  });

  test("a run released at shutdown records nothing of its own: the release is written instead", async () => {
    const { deps, events } = harness();
    const failing = defineJob(kind("released"), z.object({}), () => {
      throw new Error("aborted");
    });
    const job = await claim(failing);
    const completer = createCompleter(deps, { workerId: WORKER });
    const running = startJob(deps, input(job, [failing]));
    const released = completer.release([job]);
    expect(await completer.record(await running.outcome)).toBe("released");
    expect(await released).toEqual([job.id]);
    expect(await jobRow(t.database, job.id)).toMatchObject({
      status: "pending",
      attempts: 0,
      last_error: null,
    });
    expect(events).toEqual([{ type: "released", ids: [job.id] }]);
  });

  test("the handler's signal fires before the lease ends", async () => {
    const { deps } = harness();
    const waits = defineJob(kind("signal"), z.object({}), async (_p, c) => {
      await new Promise((_, reject) => c.signal.addEventListener("abort", () => reject(c.signal.reason)));
    });
    const job = await claim(waits, { leaseMs: 300 });
    expect(await runJob(deps, input(job, [waits], { leaseMs: 300 }))).toBe("failed");
    expect((await jobRow(t.database, job.id)).last_error).toContain("the job's lease is about to end");
  });

  test("timeoutMs: the attempt is failed at the timeout, the slot is held until the handler returns", async () => {
    const { deps, events } = harness();
    let finish = () => {};
    let sawReason: unknown;
    const slow = defineJob(
      kind("timeout"),
      z.object({}),
      async (_p, c) => {
        c.signal.addEventListener("abort", () => {
          sawReason = c.signal.reason;
        });
        await new Promise<void>((r) => (finish = r)); // ignores its signal
      },
      { timeoutMs: 200 },
    );
    const job = await claim(slow);
    let handled = false;
    const began = performance.now();
    const running = startJob(deps, input(job, [slow]));
    void running.handled.then(() => (handled = true));
    const outcome = await createCompleter(deps, { workerId: WORKER }).record(await running.outcome);
    const tookMs = performance.now() - began;
    expect(outcome).toBe("failed");
    expect(tookMs).toBeGreaterThanOrEqual(190);
    expect(tookMs).toBeLessThan(2_000);
    expect(sawReason).toBeInstanceOf(JobTimeoutError);
    const row = await jobRow(t.database, job.id);
    expect(row).toMatchObject({ status: "failed", attempts: 1 });
    expect(row.last_error).toContain(`timed out after 200 ms`);
    expect(row.run_after.getTime()).toBe(clock.now().getTime() + 5_000); // the retry policy, no jitter
    expect(events.map((e) => e.type)).toEqual(["failed"]);
    expect(handled).toBe(false); // still running: its slot stays taken
    finish();
    await waitFor(() => handled, { what: "the slot to free" });
    expect((await jobRow(t.database, job.id)).status).toBe("failed"); // its late return records nothing
  });

  test("timeoutMs on the last attempt: dead, naming the timeout", async () => {
    const { deps } = harness();
    const stuck = defineJob(
      kind("timeout-last"),
      z.object({}),
      async (_p, c) => {
        await new Promise((_, reject) => c.signal.addEventListener("abort", () => reject(c.signal.reason)));
      },
      { timeoutMs: 50 },
    );
    const job = await claim(stuck, { maxAttempts: 1 });
    expect(await runJob(deps, input(job, [stuck]))).toBe("dead");
    const row = await jobRow(t.database, job.id);
    expect(row.status).toBe("dead");
    expect(row.last_error).toContain('JobTimeoutError: job kind "');
  });

  test("a cancel signal: outcome canceled, nothing written, the handler's late success not recorded", async () => {
    const { deps, events } = harness();
    let finish = () => {};
    const ignores = defineJob(kind("cancel"), z.object({}), async () => {
      await new Promise<void>((r) => (finish = r));
    });
    const job = await claim(ignores);
    await execute(
      t.database.db,
      sql`update background_jobs set status = 'canceled', finished_at = now(), locked_by = null where id = ${job.id}`,
    );
    const controller = new AbortController();
    const running = runJob(deps, input(job, [ignores], { controller }));
    controller.abort(new JobCanceledError(job.id));
    expect(await running).toBe("canceled");
    expect(events).toEqual([{ type: "canceled", id: job.id, kind: job.kind, attempt: 1 }]);
    finish();
    expect((await jobRow(t.database, job.id)).status).toBe("canceled");
  });

  test("timeoutMs must be a positive integer", () => {
    expect(() => defineJob("test.bad-timeout", z.object({}), () => {}, { timeoutMs: 0 })).toThrow(
      "timeoutMs",
    );
    expect(() => defineJob("test.bad-timeout", z.object({}), () => {}, { timeoutMs: 1.5 })).toThrow(
      "timeoutMs",
    );
  });
});
