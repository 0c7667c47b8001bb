import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import { enqueue, enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop, type JobLoop } from "../../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob, jobKind } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase({ poolSize: 4 });
const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: () => {} });
const pools: Database[] = [];
const loops: JobLoop[] = [];
afterAll(async () => {
  await Promise.allSettled(loops.map((l) => l.stop(2_000)));
  await Promise.allSettled(pools.map((p) => p.close()));
});

const payload = z.object({ api: z.string(), n: z.number().int() });

describe("rate limits per key", () => {
  test("the key is computed at enqueue and stored; a kind without a rate limit stores none", async () => {
    const clock = new ManualClock("2030-01-01T00:00:00Z");
    const limited = jobKind("rate.stored", payload, {
      rateLimit: { key: (p) => `api:${p.api}`, limit: 5, periodSeconds: 60 },
    });
    const plain = jobKind("rate.plain", payload);
    const a = await enqueue(t.database.db, { clock }, limited, { api: "maps", n: 1 });
    const b = await enqueue(t.database.db, { clock }, plain, { api: "maps", n: 1 });
    const rows = await execute<{ id: number; rate_key: string | null }>(
      t.database.db,
      sql`select id::int as id, rate_key from background_jobs where id in (${a.id}, ${b.id}) order by id`,
    );
    expect(rows.map((r) => r.rate_key)).toEqual(["api:maps", null]);
    // a key function that gives no string refuses the enqueue: nothing is stored
    const broken = jobKind("rate.broken", payload, {
      rateLimit: { key: () => "", limit: 1, periodSeconds: 1 },
    });
    await expect(enqueue(t.database.db, { clock }, broken, { api: "x", n: 1 })).rejects.toThrow(
      /rateLimit.key/,
    );
    expect(() =>
      jobKind("rate.bad", payload, { rateLimit: { key: (p) => p.api, limit: 0, periodSeconds: 1 } }),
    ).toThrow(/rateLimit.limit/);
    const [left] = await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from background_jobs where kind = 'rate.broken'`,
    );
    expect(left?.n).toBe(0);
  });

  test("1,000 jobs at 10/s take 99 s of virtual time across three loops while a second key runs at once", async () => {
    const clock = new ManualClock("2030-01-01T00:00:00Z");
    const start = clock.now().getTime();
    const runs: { api: string; n: number; at: number }[] = [];
    const job = defineJob(
      "rate.call",
      payload,
      (p) => {
        runs.push({ api: p.api, n: p.n, at: clock.now().getTime() - start });
      },
      { rateLimit: { key: (p) => p.api, limit: 10, periodSeconds: 1 } },
    );
    const claims: number[] = [0, 0, 0];
    for (let i = 0; i < 3; i++) {
      const database = await openDatabase(t.url, { poolSize: 2 });
      pools.push(database);
      const loop = createJobLoop(
        { database, clock, logger, redactor },
        {
          registry: createJobRegistry([job]),
          parallelism: 4,
          batchSize: 5,
          pollMs: 200,
          onEvent: (e) => {
            if (e.type === "claimed") claims[i] = (claims[i] ?? 0) + 1;
          },
        },
      );
      loops.push(loop);
    }
    // the slow key's backlog first: the second key's jobs are behind all of it in run_after order
    await enqueueMany(t.database.db, { clock }, [
      ...Array.from({ length: 1_000 }, (_, n) => ({ job, payload: { api: "slow", n } })),
      ...Array.from({ length: 10 }, (_, n) => ({ job, payload: { api: "fast", n } })),
    ]);
    await Promise.all(loops.map((l) => l.start()));
    const slow = () => runs.filter((r) => r.api === "slow");
    // at virtual time 0: the second key's ten (its burst) and the slow key's first ten
    await waitFor(() => runs.filter((r) => r.api === "fast").length === 10 && slow().length === 10, {
      what: "the first burst of both keys",
    });
    expect(runs.filter((r) => r.api === "fast").every((r) => r.at === 0)).toBe(true);
    // the slow key's other jobs wait out of the claim's way: none is due, each has its own slot
    const [due] = await execute<{ due: number; slots: number }>(
      t.database.db,
      sql`select count(*) filter (where run_after <= ${clock.now().toISOString()}::timestamptz)::int as due,
                 count(distinct run_after)::int as slots
          from background_jobs where rate_key = 'slow' and status = 'pending'`,
    );
    expect(due?.due).toBe(0);
    expect(due?.slots).toBe(990);
    for (let second = 1; slow().length < 1_000; second++) {
      expect(second).toBeLessThanOrEqual(100);
      clock.advance(1_000);
      for (const loop of loops) loop.wake();
      await waitFor(() => slow().length >= Math.min(1_000, 10 + 10 * second), {
        what: `the slow key's runs of second ${second}`,
      });
    }
    // never more than the rate: at most 10 runs at any virtual second, and the last at 99 s
    const perSecond = new Map<number, number>();
    for (const r of slow()) perSecond.set(r.at, (perSecond.get(r.at) ?? 0) + 1);
    expect(Math.max(...perSecond.values())).toBe(10);
    expect(Math.max(...slow().map((r) => r.at))).toBeGreaterThanOrEqual(99_000);
    expect(new Set(slow().map((r) => r.n)).size).toBe(1_000);
    // every loop claimed; no busy loop: claims stay in the order of seconds × loops, not jobs × retries
    expect(claims.every((c) => c > 0)).toBe(true);
    const total = claims.reduce((a, b) => a + b, 0);
    expect(total).toBeLessThan(3_000);
    await waitFor(async () => {
      const [r] = await execute<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from background_jobs where kind = 'rate.call' and status = 'succeeded'`,
      );
      return r?.n === 1_010;
    });
  }, 120_000);
});
