import { type Clock, systemClock } from "../clock.ts";
import type { Environment } from "../config/schema.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { Cache } from "./port.ts";
import { createRedisCache } from "./redis.ts";
import { createUpstashCache } from "./upstash.ts";

export * from "./port.ts";
export type { CacheScript } from "./scripts.ts";

/** The prefix of every key: `Cache:KeyPrefix` when set, else `plinth:<environment>`, then a `:`. */
export function cachePrefix(environment: Environment, keyPrefix?: string): string {
  return `${keyPrefix ?? `plinth:${environment.toLowerCase()}`}:`;
}

export interface CreateCacheOptions {
  environment: Environment;
  /** `Cache:KeyPrefix` (without its trailing `:`); default `plinth:<environment>`. */
  keyPrefix?: string;
  logger: Logger;
  /** Upstash REST token when the URL carries none (`ConnectionStrings:CacheToken` / `CACHE_TOKEN`). */
  token?: string;
  /** Overrides the environment prefix (tests isolate themselves with their own). */
  prefix?: string;
  /** Per-command time limit; default 1,000 ms. */
  commandTimeoutMs?: number;
  /** Spaces the connection warnings; default the system clock (tests move it by hand). */
  clock?: Clock;
}

export type CacheScheme = "redis" | "upstash";

/** Which adapter a URL selects, or null. `http://` (Upstash protocol) is for local bridges only. */
export function cacheScheme(url: string): CacheScheme | null {
  const scheme = url.slice(0, Math.max(0, url.indexOf(":"))).toLowerCase();
  if (scheme === "redis" || scheme === "rediss") return "redis";
  if (scheme === "https" || scheme === "http") return "upstash";
  return null;
}

/** Opens the configured cache. Connecting never aborts start-up; readiness reports the state. */
export function createCache(url: string, options: CreateCacheOptions): Cache {
  const settings = {
    prefix: options.prefix ?? cachePrefix(options.environment, options.keyPrefix),
    logger: options.logger,
    commandTimeoutMs: options.commandTimeoutMs ?? 1_000,
    clock: options.clock ?? systemClock,
  };
  const scheme = cacheScheme(url);
  if (scheme === "redis") return createRedisCache(url, settings);
  if (scheme === "upstash") return createUpstashCache(url, { ...settings, token: options.token });
  throw new Error("unsupported cache URL scheme (use redis://, rediss:// or https://)");
}
