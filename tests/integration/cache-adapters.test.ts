import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Redis as UpstashClient } from "@upstash/redis";
import { type Cache, CacheUnavailableError, createCache, slotKey } from "../../src/cache/index.ts";
import { cached, invalidate } from "../../src/cache/read-through.ts";
import { defineScript, slidingLogScript } from "../../src/cache/scripts.ts";
import { ManualClock } from "../../src/clock.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { startUpstashBridge, type UpstashBridge } from "../fixtures/upstash-bridge.ts";
import {
  openRedisCache,
  REDIS_URL,
  rawRedis,
  SINGLE_REDIS_URL,
  silentLogger,
  uniquePrefix,
} from "../helpers/cache.ts";
import { waitFor } from "../helpers/jobs.ts";

// the topology's Redis (a cluster when PLINTH_TEST_TOPOLOGY=scaled), and the bridge's single node
const raw = rawRedis();
const single = REDIS_URL === SINGLE_REDIS_URL ? raw : rawRedis(SINGLE_REDIS_URL);
let bridge: UpstashBridge;
const prefixes: string[] = [];

beforeAll(async () => {
  bridge = await startUpstashBridge();
});
afterAll(async () => {
  for (const prefix of prefixes) await Promise.all([raw.cleanup(prefix), single.cleanup(prefix)]);
  raw.close();
  if (single !== raw) single.close();
  await bridge.stop();
});

const adapters: [string, (prefix: string) => Promise<Cache>, () => typeof raw][] = [
  ["redis (ioredis over TCP)", (prefix) => openRedisCache(prefix), () => raw],
  [
    "upstash (REST through the bridge)",
    async (prefix) =>
      createCache(bridge.url, {
        environment: "Development",
        logger: silentLogger,
        prefix,
        token: bridge.token,
      }),
    () => single,
  ],
];

describe.each(adapters)("cache contract: %s", (_name, open, stored) => {
  const raw = stored();
  let cache: Cache;
  let prefix: string;
  beforeAll(async () => {
    prefix = uniquePrefix("contract");
    prefixes.push(prefix);
    cache = await open(prefix);
  });
  afterAll(() => cache.close());

  test("ping answers", async () => {
    await cache.ping(1_000);
  });

  test("set/get/del round-trip values exactly, under the prefix", async () => {
    const values = ["plain", "aGVsbG8=", "OK", "ünïcödé ✓", JSON.stringify({ a: [1, "x"] }), ""];
    for (const [i, value] of values.entries()) {
      await cache.set(`v:${i}`, value, 60);
      expect(await cache.get(`v:${i}`)).toBe(value);
    }
    expect(await raw.client.get(`${prefix}v:0`)).toBe("plain");
    const ttl = await raw.client.ttl(`${prefix}v:0`);
    expect(ttl).toBeGreaterThan(50);
    expect(ttl).toBeLessThanOrEqual(60);
    expect(await cache.del("v:0", "v:1", "missing")).toBe(2);
    expect(await cache.get("v:0")).toBeNull();
    expect(await cache.get("never-set")).toBeNull();
  });

  test("set without TTL keeps the key", async () => {
    await cache.set("forever", "1", 0);
    expect(await raw.client.ttl(`${prefix}forever`)).toBe(-1);
  });

  test("incrBy is atomic and gives a new key its TTL once", async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => cache.incrBy("counter", 2, 100)));
    expect(results.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => 2 * (i + 1)));
    expect(await raw.client.ttl(`${prefix}counter`)).toBeGreaterThan(90);
    await raw.client.expire(`${prefix}counter`, 500);
    await cache.incrBy("counter", 1, 100);
    expect(await raw.client.ttl(`${prefix}counter`)).toBeGreaterThan(400);
    expect(await cache.incrBy("no-ttl", 5)).toBe(5);
    expect(await raw.client.ttl(`${prefix}no-ttl`)).toBe(-1);
  });

  test("scripts run with prefixed keys; an unknown script falls back from EVALSHA to EVAL", async () => {
    const fresh = defineScript("echo", `-- ${crypto.randomUUID()}\nreturn { KEYS[1], ARGV[1], 7 }`);
    expect(await cache.run(fresh, ["k"], ["arg"])).toEqual([`${prefix}k`, "arg", 7]);
    expect(await cache.run(fresh, ["k2"], ["again"])).toEqual([`${prefix}k2`, "again", 7]);
    const out = (await cache.run(
      slidingLogScript,
      // one hash tag: one slot on a cluster, as every multi-key script's keys must be
      ["w:{t}:a", "w:{t}:b"],
      [1_000, "consume", "m1", 2, 500, 0, 0, 0, 3, 500, 0, 0, 0],
    )) as number[];
    // allowed, retry-after, the count per key, the wait per key
    expect(out).toEqual([1, 0, 1, 1, 0, 0]);
    expect(await raw.client.zcard(`${prefix}w:{t}:a`)).toBe(1);
  });

  test("read-through: a load in flight across an invalidation does not write its old value back", async () => {
    const key = slotKey("rt:", "features"); // the entry and its generation share a slot
    // round 1: the entry has no generation yet; round 2: it has one (bumped by round 1)
    for (const _round of [1, 2]) {
      await cache.del(key); // a plain miss (an expired entry): the generation stays as it is
      let release = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let entered = () => {};
      const loading = new Promise<void>((resolve) => {
        entered = resolve;
      });
      // the reader misses and loads the old value (the database before the change committed), then
      // stalls before writing it back
      const inFlight = cached(cache, key, 300, async () => {
        entered();
        await gate;
        return { plan: "pro" };
      });
      await loading;
      // the change commits and invalidates while the reader is still loading
      expect(await invalidate(cache, [key])).toBe(true);
      release();
      expect(await inFlight).toEqual({ plan: "pro" }); // answered as loaded
      expect(await cache.get(key)).toBeNull(); // but not cached
      expect(await cached(cache, key, 300, async () => ({ plan: "suspended" }))).toEqual({
        plan: "suspended",
      });
      expect(JSON.parse((await cache.get(key)) ?? "null")).toEqual({ v: { plan: "suspended" } });
    }
    // an undisturbed load writes back as before
    expect(await invalidate(cache, [key])).toBe(true);
    expect(await cached(cache, key, 300, async () => ({ plan: "free" }))).toEqual({ plan: "free" });
    expect(await cached(cache, key, 300, async () => ({ plan: "other" }))).toEqual({ plan: "free" });
  });

  test("a script error is reported, not swallowed", async () => {
    const broken = defineScript("broken", "return redis.call('NOPE')");
    await expect(cache.run(broken, [], [])).rejects.toBeInstanceOf(CacheUnavailableError);
  });
});

describe("upstash bridge protocol", () => {
  test("refuses a wrong token", async () => {
    const client = new UpstashClient({
      url: bridge.url,
      token: "wrong",
      retry: false,
      enableTelemetry: false,
    });
    await expect(client.ping()).rejects.toThrow();
  });

  test("serves /pipeline and /multi-exec with base64 encoding", async () => {
    const prefix = uniquePrefix("bridge");
    prefixes.push(prefix);
    const client = new UpstashClient({
      url: bridge.url,
      token: bridge.token,
      retry: false,
      enableTelemetry: false,
      automaticDeserialization: false,
    });
    const before = bridge.requests.get("/multi-exec") ?? 0;
    const tx = client.multi();
    tx.set(`${prefix}a`, "aGVsbG8=");
    tx.incrby(`${prefix}n`, 3);
    tx.get(`${prefix}a`);
    expect(await tx.exec()).toEqual(["OK", 3, "aGVsbG8="]);
    expect(bridge.requests.get("/multi-exec")).toBe(before + 1);

    const pipe = client.pipeline();
    pipe.get(`${prefix}a`);
    pipe.incrby(`${prefix}n`, 1);
    pipe.lrange(`${prefix}missing`, 0, -1);
    expect(await pipe.exec()).toEqual(["aGVsbG8=", 4, []]);
    expect(bridge.requests.get("/pipeline")).toBeGreaterThanOrEqual(1);
  });

  test("concurrent transactions never interleave", async () => {
    const prefix = uniquePrefix("bridge-tx");
    prefixes.push(prefix);
    const client = new UpstashClient({
      url: bridge.url,
      token: bridge.token,
      retry: false,
      enableTelemetry: false,
    });
    const runs = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const tx = client.multi();
        tx.incr(`${prefix}x`);
        tx.incr(`${prefix}x`);
        return (await tx.exec()) as number[];
      }),
    );
    for (const [first, second] of runs) expect(second).toBe((first ?? 0) + 1);
  });
});

describe("an unreachable cache", () => {
  test("creating never throws; calls fail fast with CacheUnavailableError", async () => {
    const cache = createCache("redis://127.0.0.1:1", { environment: "Production", logger: silentLogger });
    const started = performance.now();
    await expect(cache.get("x")).rejects.toBeInstanceOf(CacheUnavailableError);
    await expect(cache.ping(500)).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(1_500);
    await cache.close();
  });

  test("upstash: an unreachable endpoint fails within the command timeout", async () => {
    const cache = createCache("http://127.0.0.1:1", {
      environment: "Production",
      logger: silentLogger,
      token: "t",
      commandTimeoutMs: 300,
    });
    await expect(cache.get("x")).rejects.toBeInstanceOf(CacheUnavailableError);
  });

  test("its connection warning goes by the injected clock: put back an hour, the next error is written", async () => {
    const clock = new ManualClock(Date.now() + 3_600_000);
    const written: string[] = [];
    const logger = createLogger({
      level: "warn",
      redactor: createRedactor([]),
      write: (l) => written.push(l),
    });
    const cache = createCache("redis://127.0.0.1:1", { environment: "Production", logger, clock });
    await waitFor(() => written.length === 1, { what: "the first connection warning" });
    // ioredis reconnects within 2 s and warns again on each refusal: the throttle's 30 s stays
    // measured from a line written an hour ahead unless the step back is seen
    clock.advance(-3_600_000);
    await waitFor(() => written.length === 2, { timeoutMs: 5_000, what: "the next connection warning" });
    expect(JSON.parse(written[1] ?? "{}")).toMatchObject({ msg: "cache connection error; reconnecting" });
    await cache.close();
  });

  test("the environment sets the prefix", () => {
    const cache = createCache("redis://127.0.0.1:1", { environment: "Production", logger: silentLogger });
    expect(cache.prefix).toBe("plinth:production:");
    void cache.close();
  });
});
