import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import type { App } from "../../src/app.ts";
import { createApp } from "../../src/app.ts";
import type { Cache } from "../../src/cache/port.ts";
import { ManualClock } from "../../src/clock.ts";
import {
  type CounterStore,
  cacheCounterStore,
  databaseCounterStore,
  memoryCounterStore,
} from "../../src/security/counter-store.ts";
import { startUpstashBridge, type UpstashBridge } from "../fixtures/upstash-bridge.ts";
import { addProbeRoutes, testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { openRedisCache, REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";

// The rate limiter decides the requests of one event-loop turn for the same client in one store
// call (`count` permits at once). These tests hold that equal to the requests taken one by one.

let bridge: UpstashBridge;
const caches: Cache[] = [];
const prefixes: string[] = [];
const raw = rawRedis();
afterAll(async () => {
  for (const cache of caches) await cache.close();
  for (const prefix of prefixes) await raw.cleanup(prefix);
  raw.close();
  await bridge.stop();
});
const t = useTestDatabase();
beforeAll(async () => {
  bridge = await startUpstashBridge();
});

async function store(kind: "redis" | "upstash" | "database" | "memory"): Promise<CounterStore> {
  if (kind === "database") return databaseCounterStore(t.database.db);
  if (kind === "memory") return memoryCounterStore();
  const prefix = uniquePrefix(`rate-batch-${kind}`);
  prefixes.push(prefix);
  const cache = await openRedisCache(
    prefix,
    kind === "redis" ? REDIS_URL : bridge.url.replace("http://", `http://:${bridge.token}@`),
  );
  caches.push(cache);
  return cacheCounterStore(cache);
}

describe.each(["redis", "upstash", "database", "memory"] as const)("GCRA on %s", (kind) => {
  test("n permits at once are what n requests one after another get", async () => {
    const counters = await store(kind);
    const now = Date.parse("2026-11-22T10:00:00Z");
    const one = async (key: string, at: number, n: number) => {
      const outcomes = [];
      for (let i = 0; i < n; i++) outcomes.push(...(await counters.rate(key, 5, 60_000, at, 1)));
      return outcomes;
    };
    const batch = await counters.rate("batch", 5, 60_000, now, 8);
    expect(batch).toEqual(await one("single", now, 8));
    expect(batch.map((o) => [o.allowed, o.remaining])).toEqual([
      [true, 4],
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0],
      [false, 0],
    ]);
    expect(batch[5]?.retryAfterMs).toBe(12_000);
    // one permit back after 12 s, two after 24 s: a partial grant
    expect(await counters.rate("batch", 5, 60_000, now + 24_000, 3)).toEqual(
      await one("single", now + 24_000, 3),
    );
    expect((await counters.rate("batch", 5, 60_000, now + 24_000, 1))[0]?.allowed).toBe(false);
  });

  test("a limit that does not divide the window in whole microseconds still bursts to exactly the limit", async () => {
    const counters = await store(kind);
    const now = Date.parse("2026-11-22T10:00:00Z");
    // 60 s / 9,999 and 1 s / 3,000 round the interval down (6,000 µs, 333 µs): the window alone
    // would hold 10,000 and 3,003 permits
    for (const [limit, windowMs] of [
      [9_999, 60_000],
      [3_000, 1_000],
    ] as const) {
      const outcomes = await counters.rate(`large-${limit}`, limit, windowMs, now, limit + 10);
      expect(outcomes.filter((o) => o.allowed)).toHaveLength(limit);
      expect(outcomes[0]?.remaining).toBe(limit - 1);
      expect(outcomes[limit - 1]).toMatchObject({ allowed: true, remaining: 0 });
      expect(outcomes[limit]?.allowed).toBe(false);
    }
  });

  test("a clock gone back further than a window (and a minute) starts the bucket again; a smaller step still counts", async () => {
    const counters = await store(kind);
    const now = Date.parse("2026-11-22T10:00:00Z");
    // five permits taken while the clock read eleven minutes later (one step forward, then back)
    const ahead = await counters.rate("stepped", 5, 60_000, now + 11 * 60_000, 5);
    expect(ahead.every((o) => o.allowed)).toBe(true);
    // a TAT that far ahead was written by a clock since put back: not refused for the eleven minutes
    // until the clock catches up, but full again
    const back = await counters.rate("stepped", 5, 60_000, now, 6);
    expect(back.map((o) => [o.allowed, o.remaining])).toEqual([
      [true, 4],
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ]);
    expect(back[5]?.retryAfterMs).toBe(12_000);
    // back less than a window (another process's clock a few seconds behind): its permits hold, and
    // the wait is what that clock's refusal would say, plus the step
    await counters.rate("skewed", 5, 60_000, now + 5_000, 5);
    const behind = await counters.rate("skewed", 5, 60_000, now, 1);
    expect(behind[0]).toMatchObject({ allowed: false, retryAfterMs: 17_000 });
  });
});

describe.each(["redis", "database"] as const)("a burst through the app on %s", (kind) => {
  let app: App;
  beforeAll(async () => {
    const prefix = uniquePrefix(`rate-burst-${kind}`);
    prefixes.push(prefix);
    const config = testConfig({
      settings: { "RateLimiting:Global:PermitLimit": "5", "RateLimiting:Global:WindowSeconds": "60" },
      cacheUrl: kind === "redis" ? REDIS_URL : null,
    });
    const deps = await testDeps(config, {
      database: t.database,
      clock: new ManualClock("2026-11-22T10:00:00Z"),
      cachePrefix: prefix,
    });
    if (deps.cache) caches.push(deps.cache);
    app = addProbeRoutes(createApp(deps), deps);
  });

  test("eight requests at once from one client: five pass with distinct counts, three are refused", async () => {
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => app.request("/api/probe", {}, { peerAddress: "198.51.100.7" })),
    );
    const passed = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status === 429);
    expect(passed).toHaveLength(5);
    expect(refused).toHaveLength(3);
    expect(passed.map((r) => r.headers.get("ratelimit")).sort()).toEqual(
      [4, 3, 2, 1, 0].map((left, i) => `"global";r=${left};t=${12 * (i + 1)}`).sort(),
    );
    for (const r of refused) expect(r.headers.get("retry-after")).toBe("12");
    // another client in the same turn has a bucket of its own
    const [mine, other] = await Promise.all([
      app.request("/api/probe", {}, { peerAddress: "198.51.100.7" }),
      app.request("/api/probe", {}, { peerAddress: "198.51.100.8" }),
    ]);
    expect(mine?.status).toBe(429);
    expect(other?.status).toBe(200);
  });
});

test("a failed sweep of expired counters does not fail the decision it follows (database store)", async () => {
  const counters = databaseCounterStore(t.database.db, { cleanupEvery: 1 });
  await t.database.db.execute(sql`create function refuse_sweep() returns trigger language plpgsql as
    $$ begin raise exception 'sweep refused'; end $$`);
  await t.database.db.execute(
    sql`create trigger refuse_sweep before delete on security_counters for each statement execute function refuse_sweep()`,
  );
  try {
    const now = Date.parse("2026-11-22T11:00:00Z");
    const [outcome] = await counters.rate("sweep-key", 5, 60_000, now, 1);
    expect(outcome?.allowed).toBe(true);
    const windows = await counters.window("hit", [{ key: "sweep-window", limit: 3, windowMs: 60_000 }], now);
    expect(windows.counts).toEqual([1]);
  } finally {
    await t.database.db.execute(sql`drop trigger refuse_sweep on security_counters`);
    await t.database.db.execute(sql`drop function refuse_sweep()`);
  }
});
