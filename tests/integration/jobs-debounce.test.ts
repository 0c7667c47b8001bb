import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { enqueue, enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop, type JobLoop } from "../../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase({ poolSize: 8 });
const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: () => {} });
const started: JobLoop[] = [];
afterAll(async () => {
  await Promise.allSettled(started.map((l) => l.stop(1_000)));
});

function runner(clock: ManualClock, kind: string) {
  const runs: { version: number; at: number }[] = [];
  const job = defineJob(kind, z.object({ version: z.number() }), (payload) => {
    runs.push({ version: payload.version, at: clock.now().getTime() });
  });
  const loop = createJobLoop(
    { database: t.database, clock, logger, redactor },
    { registry: createJobRegistry([job]), parallelism: 2, batchSize: 5, pollMs: 20 },
  );
  started.push(loop);
  return { job, runs, loop };
}

const rows = (kind: string) =>
  execute<{ id: number; status: string; payload: { version: number } }>(
    t.database.db,
    sql`select id::int as id, status, payload from background_jobs where kind = ${kind} order by id`,
  );

describe("debounce", () => {
  test("50 enqueues within the period give one run, with the last payload", async () => {
    const clock = new ManualClock("2030-01-01T00:00:00Z");
    const { job, runs, loop } = runner(clock, "debounce.trailing");
    await loop.start();
    const ids = new Set<number>();
    let created = 0;
    for (let version = 1; version <= 50; version++) {
      const r = await enqueue(
        t.database.db,
        { clock },
        job,
        { version },
        {
          debounce: { key: "tenant-1:reindex", periodMs: 1_000 },
        },
      );
      ids.add(r.id);
      if (r.created) created++;
      clock.advance(100); // each within the period of the one before
    }
    expect(ids.size).toBe(1);
    expect(created).toBe(1);
    // 4.9 s after the first: the last enqueue pushed the start to 1 s after it
    const [row] = await execute<{ run_after: string }>(
      t.database.db,
      sql`select run_after from background_jobs where id = ${[...ids][0]}`,
    );
    expect(new Date(row?.run_after as string).toISOString()).toBe("2030-01-01T00:00:05.900Z");
    // not due yet: still the one pending job
    clock.advance(800);
    expect((await rows("debounce.trailing")).map((r) => r.status)).toEqual(["pending"]);
    expect(runs).toEqual([]);
    clock.advance(200);
    await waitFor(() => runs.length === 1, { what: "the debounced run" });
    expect(runs[0]?.version).toBe(50);
    await waitFor(async () => (await rows("debounce.trailing"))[0]?.status === "succeeded");
    expect(await rows("debounce.trailing")).toHaveLength(1);
    await loop.stop(1_000);
  });

  test("maxWaitMs bounds the delay however often it is pushed; a later enqueue makes one run more", async () => {
    const clock = new ManualClock("2030-01-01T00:00:00Z");
    const { job, runs, loop } = runner(clock, "debounce.bounded");
    const start = clock.now().getTime();
    await loop.start();
    let version = 0;
    // an enqueue every 500 ms, period 1 s: without maxWait it would never start
    while (runs.length === 0) {
      version++;
      await enqueue(
        t.database.db,
        { clock },
        job,
        { version },
        {
          debounce: { key: "bounded", periodMs: 1_000, maxWaitMs: 3_000 },
        },
      );
      expect(clock.now().getTime() - start).toBeLessThanOrEqual(3_500);
      clock.advance(500);
      if (clock.now().getTime() - start >= 3_000)
        await waitFor(() => runs.length === 1, { what: "the run at maxWait" });
    }
    expect(runs[0]?.at).toBeGreaterThanOrEqual(start + 3_000);
    expect(runs[0]?.version).toBe(version);
    // the key is free once the job started: the next enqueue is a new job
    const next = await enqueue(
      t.database.db,
      { clock },
      job,
      { version: 99 },
      {
        debounce: { key: "bounded", periodMs: 1_000, maxWaitMs: 3_000 },
      },
    );
    expect(next.created).toBe(true);
    clock.advance(1_000);
    await waitFor(() => runs.length === 2, { what: "the second run" });
    expect(runs[1]?.version).toBe(99);
    await loop.stop(1_000);
  });

  test("a key held by another kind, a dedup key beside it, and a bulk enqueue are refused", async () => {
    const clock = new ManualClock("2030-01-01T00:00:00Z");
    const a = defineJob("debounce.a", z.object({ version: z.number() }), () => {});
    const b = defineJob("debounce.b", z.object({ version: z.number() }), () => {});
    await enqueue(
      t.database.db,
      { clock },
      a,
      { version: 1 },
      { debounce: { key: "shared", periodMs: 1_000 } },
    );
    await expect(
      enqueue(t.database.db, { clock }, b, { version: 1 }, { debounce: { key: "shared", periodMs: 1_000 } }),
    ).rejects.toThrow(/another kind/);
    await expect(
      enqueue(
        t.database.db,
        { clock },
        a,
        { version: 1 },
        { dedupKey: "d", debounce: { key: "k", periodMs: 1 } },
      ),
    ).rejects.toThrow(/not both/);
    await expect(
      enqueueMany(t.database.db, { clock }, [
        { job: a, payload: { version: 1 }, options: { debounce: { key: "k", periodMs: 1 } } },
      ]),
    ).rejects.toThrow(/one at a time/);
  });
});
