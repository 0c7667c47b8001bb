import { Redis } from "ioredis";
import { type Cache, createCache } from "../../src/cache/index.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger, type Logger } from "../../src/telemetry/logger.ts";

/** The shared Redis every test talks to; tests isolate themselves by key prefix, never flush. */
export const REDIS_URL = process.env.PLINTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export const silentLogger: Logger = createLogger({
  level: "error",
  redactor: createRedactor([]),
  write: () => {},
});

/** A prefix no other test file or process uses. */
export function uniquePrefix(label: string): string {
  return `plinth:test-${label}-${process.pid}-${crypto.randomUUID().slice(0, 8)}:`;
}

/** A Redis cache under its own prefix, connected before it is handed out. */
export async function openRedisCache(prefix: string, url = REDIS_URL): Promise<Cache> {
  const cache = createCache(url, { environment: "Development", logger: silentLogger, prefix });
  if (!(await cache.waitReady(5_000))) throw new Error(`no Redis at ${url}`);
  return cache;
}

/** A raw client to look at keys as they are stored; `cleanup` deletes everything under a prefix. */
export function rawRedis(url = REDIS_URL) {
  const client = new Redis(url, { lazyConnect: false });
  return {
    client,
    keys: async (prefix: string): Promise<string[]> => {
      const found: string[] = [];
      let cursor = "0";
      do {
        const [next, batch] = await client.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
        cursor = next;
        found.push(...batch);
      } while (cursor !== "0");
      return found.sort();
    },
    cleanup: async (prefix: string): Promise<void> => {
      let cursor = "0";
      do {
        const [next, batch] = await client.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
        cursor = next;
        if (batch.length > 0) await client.del(...batch);
      } while (cursor !== "0");
    },
    close: () => client.disconnect(),
  };
}
