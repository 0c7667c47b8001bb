import { afterAll, beforeAll, expect, test } from "bun:test";
import diagnostics from "node:diagnostics_channel";
import type { Cache } from "../../src/cache/port.ts";
import { openRedisCache, uniquePrefix } from "../helpers/cache.ts";

// ioredis traces a command only when `TracingChannel#hasSubscribers` is not false; Bun lacks that
// getter, so src/runtime/tracing-channel.ts supplies it (loaded with the Redis adapter).

let cache: Cache;
beforeAll(async () => {
  cache = await openRedisCache(uniquePrefix("tracing-channel"));
});
afterAll(() => cache.close());

test("ioredis commands are traced when someone listens, and skip tracing when nobody does", async () => {
  const channel = diagnostics.tracingChannel("ioredis:command");
  expect(channel.hasSubscribers).toBe(false);

  const seen: string[] = [];
  const listener = {
    start: (message: unknown) => seen.push((message as { command: string }).command),
  };
  channel.subscribe(listener);
  try {
    expect(channel.hasSubscribers).toBe(true);
    await cache.set("k", "v", 10);
    expect(await cache.get("k")).toBe("v");
    expect(seen).toEqual(["set", "get"]);
  } finally {
    channel.unsubscribe(listener);
  }
  expect(channel.hasSubscribers).toBe(false);
  await cache.get("k");
  expect(seen).toEqual(["set", "get"]);
});
