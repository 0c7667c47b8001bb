import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, createApp } from "../../src/app.ts";
import type { Cache } from "../../src/cache/port.ts";
import { ManualClock } from "../../src/clock.ts";
import { type CounterStore, cacheCounterStore } from "../../src/security/counter-store.ts";
import { LEASE_MS } from "../../src/security/rate-leases.ts";
import { addProbeRoutes, testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { openRedisCache, REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";

// Far from its budget, a busy client's rate-limit decisions come from local leases on the shared
// GCRA bucket (src/security/rate-leases.ts): fewer store calls, and never more permits than the
// limit across processes. The store here is the real Redis (a cluster on the scaled topology); the
// wrapper only counts the calls that reach it.

const raw = rawRedis();
const caches: Cache[] = [];
const prefixes: string[] = [];
afterAll(async () => {
  for (const cache of caches) await cache.close();
  for (const prefix of prefixes) await raw.cleanup(prefix);
  raw.close();
});
const t = useTestDatabase();

interface Counted {
  store: CounterStore;
  calls: Map<string, number>;
}

/** The real counter store on Redis, counting its `rate` calls per policy. */
function counted(cache: Cache): Counted {
  const real = cacheCounterStore(cache);
  const calls = new Map<string, number>();
  return {
    calls,
    store: {
      ...real,
      rate: (key, limit, windowMs, nowMs, count) => {
        const policy = key.split(":")[1] ?? "";
        calls.set(policy, (calls.get(policy) ?? 0) + 1);
        return real.rate(key, limit, windowMs, nowMs, count);
      },
    },
  };
}

async function apiProcess(
  prefix: string,
  clock: ManualClock,
  settings: Record<string, string>,
): Promise<{ app: App; calls: Map<string, number> }> {
  const cache = await openRedisCache(prefix, REDIS_URL);
  caches.push(cache);
  const { store, calls } = counted(cache);
  const config = testConfig({ settings, cacheUrl: REDIS_URL });
  const deps = await testDeps(config, { database: t.database, clock, cachePrefix: prefix, counters: store });
  if (deps.cache) caches.push(deps.cache);
  return { app: addProbeRoutes(createApp(deps), deps), calls };
}

const probe = (app: App, ip: string, path = "/api/probe") => app.request(path, {}, { peerAddress: ip });

describe("rate-limit leases", () => {
  let clock: ManualClock;
  let one: { app: App; calls: Map<string, number> };
  let two: { app: App; calls: Map<string, number> };
  beforeAll(async () => {
    clock = new ManualClock("2026-11-26T10:00:00Z");
    const prefix = uniquePrefix("rl-leases");
    prefixes.push(prefix);
    const settings = {
      "RateLimiting:Global:PermitLimit": "1000",
      "RateLimiting:Global:WindowSeconds": "60",
      "RateLimiting:Auth:PermitLimit": "1000",
      "RateLimiting:Auth:WindowSeconds": "60",
    };
    one = await apiProcess(prefix, clock, settings);
    two = await apiProcess(prefix, clock, settings);
  });

  test("a busy client far from its budget costs a few store calls, not one per request", async () => {
    const before = one.calls.get("global") ?? 0;
    for (let i = 0; i < 200; i++) {
      const response = await probe(one.app, "198.51.100.1");
      expect(response.status).toBe(200);
      const left = Number(/"global";r=(\d+);/.exec(response.headers.get("ratelimit") ?? "")?.[1]);
      expect(left).toBeLessThan(1000);
      expect(left).toBeGreaterThanOrEqual(700);
      clock.advance(1);
    }
    const calls = (one.calls.get("global") ?? 0) - before;
    // one exact call, then leases of up to 50 (1/20 of the limit): about five calls
    expect(calls).toBeLessThanOrEqual(10);
  });

  test("two processes together never admit more than the limit", async () => {
    const ip = "198.51.100.2";
    let admitted = 0;
    // no time passes: the bucket does not refill, so exactly 1,000 permits exist
    for (let i = 0; i < 1_300; i++) {
      const response = await probe(i % 3 === 0 ? two.app : one.app, ip);
      if (response.status === 200) admitted++;
      else expect(response.status).toBe(429);
    }
    expect(admitted).toBe(1_000);
    expect((await probe(one.app, ip)).status).toBe(429);
    expect((await probe(two.app, ip)).status).toBe(429);
    clock.advance(60_000);
  });

  test("near the budget every decision is the store's again: the refusal is exact", async () => {
    const ip = "198.51.100.3";
    const before = one.calls.get("global") ?? 0;
    // spend 600 of 1,000 permits through leases, then 400 more one at a time
    for (let i = 0; i < 1_000; i++) expect((await probe(one.app, ip)).status).toBe(200);
    const refused = await probe(one.app, ip);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    // the second half (under 500 left) went to the store request by request
    expect((one.calls.get("global") ?? 0) - before).toBeGreaterThanOrEqual(500);
    clock.advance(60_000);
  });

  test("a lease lapses after LEASE_MS: its leftover permits are not spent later", async () => {
    const ip = "198.51.100.4";
    for (let i = 0; i < 20; i++) {
      await probe(one.app, ip);
      clock.advance(1);
    }
    clock.advance(LEASE_MS);
    const before = one.calls.get("global") ?? 0;
    expect((await probe(one.app, ip)).status).toBe(200);
    expect((one.calls.get("global") ?? 0) - before).toBe(1);
    clock.advance(60_000);
  });

  test("a lease taken while the clock read ahead lapses when the clock is put back, and none is sized across the step", async () => {
    const ip = "198.51.100.6";
    const start = clock.now().getTime();
    clock.advance(11 * 60_000);
    for (let i = 0; i < 20; i++) {
      await probe(one.app, ip);
      clock.advance(1);
    }
    clock.set(start);
    const before = one.calls.get("global") ?? 0;
    expect((await probe(one.app, ip)).status).toBe(200);
    expect((one.calls.get("global") ?? 0) - before).toBe(1);
    // nor is a new lease sized by demand measured across the step: the bucket gave that one permit
    const other = await probe(two.app, ip);
    expect(other.headers.get("ratelimit")).toStartWith('"global";r=998;');
    clock.set(start + 12 * 60_000);
  });

  test("the fail-closed auth limit takes no lease: every attempt asks the store", async () => {
    const ip = "198.51.100.5";
    const before = one.calls.get("auth") ?? 0;
    for (let i = 0; i < 30; i++) {
      const response = await one.app.request(
        "/api/auth/refresh",
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ refreshToken: "not-a-refresh-token" }),
        },
        { peerAddress: ip },
      );
      expect(response.status).toBe(401);
      clock.advance(1);
    }
    expect((one.calls.get("auth") ?? 0) - before).toBe(30);
    clock.advance(60_000);
  });
});
