import { Redis } from "@upstash/redis";
import { withTimeout } from "../runtime/with-timeout.ts";
import { type AdapterSettings, type Cache, CacheUnavailableError, isNoScript } from "./port.ts";
import { incrByScript } from "./scripts.ts";

/**
 * Upstash REST (`https://<host>`; the token is the URL's password, e.g. `https://:TOKEN@host`, or
 * `ConnectionStrings:CacheToken` / `CACHE_TOKEN`). Stateless HTTP: nothing to reconnect, each call
 * is bounded by the command timeout and never retried (a retry would hide an outage).
 */
export function createUpstashCache(url: string, settings: AdapterSettings & { token?: string }): Cache {
  const parsed = new URL(url);
  const token = parsed.password ? decodeURIComponent(parsed.password) : settings.token;
  if (!token)
    throw new Error("the Upstash cache needs a token (URL password or ConnectionStrings:CacheToken)");
  parsed.username = "";
  parsed.password = "";
  const client = new Redis({
    url: parsed.toString().replace(/\/$/, ""),
    token,
    automaticDeserialization: false,
    enableTelemetry: false,
    readYourWrites: false,
    retry: false,
    signal: () => AbortSignal.timeout(settings.commandTimeoutMs),
  });
  const { prefix } = settings;
  const k = (key: string) => prefix + key;
  const call = async <T>(operation: string, work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      throw new CacheUnavailableError(operation, error);
    }
  };

  const cache: Cache = {
    adapter: "upstash",
    cluster: false,
    prefix,
    ping: async (timeoutMs) => {
      await withTimeout(client.ping(), timeoutMs, "cache ping");
    },
    waitReady: (timeoutMs) =>
      withTimeout(client.ping(), timeoutMs, "cache ping").then(
        () => true,
        () => false,
      ),
    get: (key) => call("get", () => client.get<string>(k(key))),
    set: (key, value, ttlSeconds) =>
      call("set", async () => {
        await client.set(k(key), value, ttlSeconds > 0 ? { ex: ttlSeconds } : undefined);
      }),
    del: (...keys) =>
      keys.length === 0 ? Promise.resolve(0) : call("del", () => client.del(...keys.map(k))),
    incrBy: async (key, by, ttlSeconds = 0) => Number(await cache.run(incrByScript, [key], [by, ttlSeconds])),
    run: (script, keys, args) =>
      call(script.name, async () => {
        const full = keys.map(k);
        const values = args.map(String);
        try {
          return await client.evalsha(script.sha1, full, values);
        } catch (error) {
          if (!isNoScript(error)) throw error;
          return await client.eval(script.source, full, values);
        }
      }),
    close: async () => {},
  };
  return cache;
}
