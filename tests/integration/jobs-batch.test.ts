import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop, type JobLoop } from "../../src/jobs/job-loop.ts";
import { createJobRegistry, defineBatchJob, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase({ poolSize: 4 });
const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: () => {} });
const loops: JobLoop[] = [];
afterAll(async () => {
  await Promise.allSettled(loops.map((l) => l.stop(1_000)));
});

const payload = z.object({ n: z.number().int(), group: z.string() });

describe("batch handlers", () => {
  test("a batch gets at most maxSize jobs of one group after the wait; failed items are retried alone", async () => {
    const clock = new ManualClock("2030-01-01T00:00:00Z");
    const calls: { n: number; group: string; attempt: number }[][] = [];
    const job = defineBatchJob(
      "batch.send",
      payload,
      (items) => {
        calls.push(items.map((i) => ({ n: i.payload.n, group: i.payload.group, attempt: i.attempt })));
        // every seventh item fails its first attempt; the others succeed with a result
        return items.map(
          (i): PromiseSettledResult<unknown> =>
            i.payload.n % 7 === 0 && i.attempt === 1
              ? { status: "rejected", reason: new Error(`item ${i.payload.n} refused`) }
              : { status: "fulfilled", value: { sent: i.payload.n } },
        );
      },
      { batch: { maxSize: 10, timeoutMs: 1_000 } },
    );
    let claims = 0;
    const loop = createJobLoop(
      { database: t.database, clock, logger, redactor },
      {
        registry: createJobRegistry([job]),
        parallelism: 2,
        batchSize: 5,
        pollMs: 20,
        retry: { baseMs: 0, maxMs: 0, jitter: 0 },
        onEvent: (e) => {
          if (e.type === "claimed") claims++;
        },
      },
    );
    loops.push(loop);
    await enqueueMany(t.database.db, { clock }, [
      ...Array.from({ length: 35 }, (_, n) => ({
        job,
        payload: { n, group: "t1" },
        options: { groupKey: "t1" },
      })),
      ...Array.from({ length: 12 }, (_, n) => ({
        job,
        payload: { n, group: "t2" },
        options: { groupKey: "t2" },
      })),
    ]);
    await loop.start();
    // within the wait nothing runs: the jobs are due a second after their enqueue
    await waitFor(() => claims >= 3, { what: "a few claims" });
    expect(calls).toEqual([]);
    clock.advance(1_000);
    loop.wake();
    const done = async () => {
      const [r] = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs where kind = 'batch.send' and status = 'succeeded'`,
      );
      return r?.n === 47;
    };
    await waitFor(done, { what: "every job of both groups to succeed" });
    for (const call of calls) {
      expect(call.length).toBeLessThanOrEqual(10);
      expect(new Set(call.map((i) => i.group)).size).toBe(1);
    }
    // a backlog goes in full batches
    expect(Math.max(...calls.map((c) => c.length))).toBe(10);
    // each job ran once, but the seven refused ones twice: their retries without the others
    const runs = new Map<string, number[]>();
    for (const item of calls.flat()) {
      const key = `${item.group}:${item.n}`;
      runs.set(key, [...(runs.get(key) ?? []), item.attempt]);
    }
    expect(runs.size).toBe(47);
    for (const [key, attempts] of runs) {
      const n = Number(key.split(":")[1]);
      expect(attempts).toEqual(n % 7 === 0 ? [1, 2] : [1]);
    }
    const retried = calls.filter((c) => c.some((i) => i.attempt === 2));
    for (const call of retried) expect(call.every((i) => i.attempt === 2)).toBe(true);
    // each outcome recorded on its own job: the results and the refused ones' first error
    const rows = await execute<{
      n: number;
      result: { sent: number };
      attempts: number;
      last_error: string | null;
    }>(
      t.database.db,
      sql`select (payload->>'n')::int as n, result, attempts, last_error from background_jobs
          where kind = 'batch.send' and group_key = 't1' order by (payload->>'n')::int`,
    );
    for (const row of rows) {
      expect(row.result).toEqual({ sent: row.n });
      expect(row.attempts).toBe(row.n % 7 === 0 ? 2 : 1);
      if (row.n % 7 === 0) expect(row.last_error).toContain(`item ${row.n} refused`);
    }
    await loop.stop(1_000);
  }, 60_000);

  test("a batch handler that throws fails every item; a kind cannot be a batch and rate limited", async () => {
    const clock = new ManualClock("2030-01-01T00:00:00Z");
    const job = defineBatchJob(
      "batch.broken",
      payload,
      () => {
        throw new Error("the bulk API is down");
      },
      { batch: { maxSize: 5, timeoutMs: 0 }, maxAttempts: 1 },
    );
    const loop = createJobLoop(
      { database: t.database, clock, logger, redactor },
      { registry: createJobRegistry([job]), parallelism: 1, batchSize: 5, pollMs: 20 },
    );
    loops.push(loop);
    await enqueueMany(
      t.database.db,
      { clock },
      Array.from({ length: 3 }, (_, n) => ({ job, payload: { n, group: "g" } })),
    );
    await loop.start();
    await waitFor(async () => {
      const rows = await execute<{ status: string; last_error: string | null }>(
        t.database.db,
        sql`select status, last_error from background_jobs where kind = 'batch.broken'`,
      );
      return (
        rows.length === 3 &&
        rows.every((r) => r.status === "dead" && r.last_error?.includes("bulk API is down"))
      );
    });
    await loop.stop(1_000);
    expect(() =>
      defineBatchJob("batch.rated", payload, () => undefined, {
        batch: { maxSize: 5, timeoutMs: 0 },
        rateLimit: { key: (p) => p.group, limit: 1, periodSeconds: 1 },
      }),
    ).toThrow(/batch kind and rate limited/);
    // a batch kind registered with a single-job handler is refused
    expect(() =>
      createJobRegistry([
        defineJob("batch.single", payload, () => {}, { batch: { maxSize: 2, timeoutMs: 0 } }),
      ]),
    ).toThrow(/needs a batch handler/);
  }, 30_000);
});
