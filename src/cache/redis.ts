import { Redis } from "ioredis";
// ioredis asks TracingChannel#hasSubscribers before tracing each command; Bun lacks the getter
import "../runtime/tracing-channel.ts";
import { withTimeout } from "../runtime/with-timeout.ts";
import {
  type AdapterSettings,
  type Cache,
  CacheUnavailableError,
  isNoScript,
  throttledWarn,
} from "./port.ts";
import { incrByScript } from "./scripts.ts";

/** Redis over TCP (`redis://`, `rediss://`) through ioredis. */
export function createRedisCache(url: string, settings: AdapterSettings): Cache {
  const { prefix } = settings;
  // AbortOnConnectFail=false: never throw at start-up; reconnect forever with a capped delay, and
  // fail commands at once while disconnected (no offline queue) so callers can fail closed.
  const client = new Redis(url, {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: settings.commandTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
    // commands issued in the same event-loop turn (one per concurrent request) go out in one write
    enableAutoPipelining: true,
  });
  client.on("error", throttledWarn(settings.logger, "cache connection error; reconnecting"));

  const call = async <T>(operation: string, work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      throw new CacheUnavailableError(operation, error);
    }
  };
  const k = (key: string) => prefix + key;

  const cache: Cache = {
    adapter: "redis",
    prefix,
    ping: async (timeoutMs) => {
      await withTimeout(client.ping(), timeoutMs, "cache ping");
    },
    waitReady: async (timeoutMs) => {
      if (client.status === "ready") return true;
      return new Promise<boolean>((resolve) => {
        const done = (ok: boolean) => {
          clearTimeout(timer);
          client.off("ready", onReady);
          resolve(ok);
        };
        const onReady = () => done(true);
        const timer = setTimeout(() => done(false), timeoutMs);
        client.once("ready", onReady);
      });
    },
    get: (key) => call("get", () => client.get(k(key))),
    set: (key, value, ttlSeconds) =>
      call("set", async () => {
        if (ttlSeconds > 0) await client.set(k(key), value, "EX", ttlSeconds);
        else await client.set(k(key), value);
      }),
    del: (...keys) =>
      keys.length === 0 ? Promise.resolve(0) : call("del", () => client.del(...keys.map(k))),
    incrBy: async (key, by, ttlSeconds = 0) => Number(await cache.run(incrByScript, [key], [by, ttlSeconds])),
    run: (script, keys, args) =>
      call(script.name, async () => {
        const full = keys.map(k);
        try {
          return await client.evalsha(script.sha1, full.length, ...full, ...args);
        } catch (error) {
          if (!isNoScript(error)) throw error;
          return await client.eval(script.source, full.length, ...full, ...args);
        }
      }),
    close: async () => {
      client.disconnect(false);
    },
  };
  return cache;
}
