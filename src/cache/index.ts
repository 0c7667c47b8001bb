import { Redis } from "ioredis";
import type { Environment } from "../config/schema.ts";
import { withTimeout } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";

/** The cache port. Adapters: Redis over TCP (`redis://`, `rediss://`). */
export interface Cache {
  readonly adapter: "redis";
  /** Prefix every key carries (`plinth:<environment>:`). */
  readonly prefix: string;
  ping(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

export function cachePrefix(environment: Environment): string {
  return `plinth:${environment.toLowerCase()}:`;
}

export interface CreateCacheOptions {
  environment: Environment;
  logger: Logger;
}

function createRedisCache(url: string, options: CreateCacheOptions): Cache {
  const prefix = cachePrefix(options.environment);
  // AbortOnConnectFail=false: never throw at start-up; reconnect forever with a capped delay, and
  // fail commands at once while disconnected (no offline queue) so callers can fail closed.
  const client = new Redis(url, {
    keyPrefix: prefix,
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
  });
  let lastErrorLog = 0;
  client.on("error", (error: Error) => {
    const now = Date.now();
    if (now - lastErrorLog < 30_000) return;
    lastErrorLog = now;
    options.logger.warn("cache connection error; reconnecting", { error: error.message });
  });
  return {
    adapter: "redis",
    prefix,
    ping: async (timeoutMs) => {
      await withTimeout(client.ping(), timeoutMs, "cache ping");
    },
    close: async () => {
      client.disconnect(false);
    },
  };
}

/** Opens the configured cache. Connecting never aborts start-up; readiness reports the state. */
export function createCache(url: string, options: CreateCacheOptions): Cache {
  const scheme = url.slice(0, url.indexOf(":"));
  if (scheme === "redis" || scheme === "rediss") return createRedisCache(url, options);
  throw new Error(`unsupported cache URL scheme "${scheme}:" (use redis:// or rediss://)`);
}
