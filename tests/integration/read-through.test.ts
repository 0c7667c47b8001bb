import { afterAll, beforeAll, expect, test } from "bun:test";
import { createCache } from "../../src/cache/index.ts";
import type { Cache } from "../../src/cache/port.ts";
import { cached, invalidate, tenantFeaturesKey } from "../../src/cache/read-through.ts";
import { openRedisCache, rawRedis, silentLogger, uniquePrefix } from "../helpers/cache.ts";

const raw = rawRedis();
const prefix = uniquePrefix("features");
let cache: Cache;
beforeAll(async () => {
  cache = await openRedisCache(prefix);
});
afterAll(async () => {
  await cache.close();
  await raw.cleanup(prefix);
  raw.close();
});

test("reads through once, serves from the cache, reloads after invalidation", async () => {
  let loads = 0;
  let features = { reports: true, seats: 5 };
  const load = async () => {
    loads++;
    return features;
  };
  const key = tenantFeaturesKey("tenant-1");
  expect(await cached(cache, key, 300, load)).toEqual({ reports: true, seats: 5 });
  expect(await cached(cache, key, 300, load)).toEqual({ reports: true, seats: 5 });
  expect(loads).toBe(1);
  expect(await raw.client.ttl(`${prefix}${key}`)).toBeGreaterThan(290);

  features = { reports: false, seats: 10 };
  expect(await invalidate(cache, [key])).toBe(true);
  expect(await cached(cache, key, 300, load)).toEqual({ reports: false, seats: 10 });
  expect(loads).toBe(2);
});

test("falsy values are cached too; other tenants have their own entries", async () => {
  let loads = 0;
  const load = async () => {
    loads++;
    return null;
  };
  expect(await cached(cache, tenantFeaturesKey("t-null"), 60, load)).toBeNull();
  expect(await cached(cache, tenantFeaturesKey("t-null"), 60, load)).toBeNull();
  expect(loads).toBe(1);
  expect(tenantFeaturesKey("a")).not.toBe(tenantFeaturesKey("b"));
});

test("without a cache, or with an unreachable one, the database is read every time", async () => {
  let loads = 0;
  const load = async () => ++loads;
  expect(await cached(null, "k", 60, load)).toBe(1);
  expect(await cached(null, "k", 60, load)).toBe(2);
  const down = createCache("redis://127.0.0.1:1", { environment: "Development", logger: silentLogger });
  expect(await cached(down, "k", 60, load, { logger: silentLogger })).toBe(3);
  expect(await invalidate(down, ["k"], { logger: silentLogger })).toBe(false);
  await down.close();
});
