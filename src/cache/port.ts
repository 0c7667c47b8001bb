import { type Clock, epochMs, isFresh } from "../clock.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { CacheScript } from "./scripts.ts";

/**
 * The cache port. Adapters: Redis over TCP (`redis://`, `rediss://`, ioredis) and Upstash REST
 * (`https://`, `@upstash/redis`). Keys given to it are relative: the adapter prepends `prefix`.
 * Every call fails fast (CacheUnavailableError) while the cache is unreachable; callers decide
 * whether that fails closed (security windows, auth rate limit) or open (read-through caches).
 */
export interface Cache {
  readonly adapter: "redis" | "upstash";
  /**
   * A Redis Cluster: a script's keys must share one slot (one hash tag, `slotKey`), so callers
   * split work over several windows or entries into one script per slot.
   */
  readonly cluster: boolean;
  /** Prefix every key carries (`Cache:KeyPrefix` + `:`; default `plinth:<environment>:`). */
  readonly prefix: string;
  ping(timeoutMs: number): Promise<void>;
  /** Waits up to `timeoutMs` for a usable connection; never throws (start-up gives it a moment). */
  waitReady(timeoutMs: number): Promise<boolean>;
  get(key: string): Promise<string | null>;
  /** Sets a value with a TTL in seconds (0: no expiry). */
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
  /** Deletes keys; resolves to how many existed. */
  del(...keys: string[]): Promise<number>;
  /** Atomically adds `by`; a new key gets `ttlSeconds` (0: none). Resolves to the new value. */
  incrBy(key: string, by: number, ttlSeconds?: number): Promise<number>;
  /** Runs a Lua script atomically in one round trip (EVALSHA, then EVAL on NOSCRIPT). */
  run(script: CacheScript, keys: string[], args: (string | number)[]): Promise<unknown>;
  close(): Promise<void>;
}

/** The cache could not be reached or did not answer in time. */
export class CacheUnavailableError extends Error {
  override name = "CacheUnavailableError";
  constructor(operation: string, cause: unknown) {
    super(`cache ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

export interface AdapterSettings {
  prefix: string;
  logger: Logger;
  commandTimeoutMs: number;
  /** The process's clock: it spaces the connection warnings (`throttledWarn`). */
  clock: Clock;
}

export function isNoScript(error: unknown): boolean {
  return error instanceof Error && /NOSCRIPT/.test(error.message);
}

/** A flapping connection's warning is written at most this often. */
const WARN_INTERVAL_MS = 30_000;

/**
 * Logs at most one line per `WARN_INTERVAL_MS` for a flapping connection, by `clock`. A last line
 * written while the clock read more than `CLOCK_STEP_BACK_MS` ahead (a clock since put back,
 * `isFresh`) does not hold the next one back for the length of the step.
 */
export function throttledWarn(logger: Logger, message: string, clock: Clock): (error: unknown) => void {
  let last: number | undefined;
  return (error) => {
    const now = epochMs(clock);
    if (last !== undefined && isFresh(last, WARN_INTERVAL_MS, now)) return;
    last = now;
    logger.warn(message, { error: error instanceof Error ? error.message : String(error) });
  };
}

/**
 * A key whose slot on a Redis Cluster is decided by `identity` alone (a hash tag): every key built
 * from the same identity (an entry and its generation, one window) lands on one slot. Harmless on
 * a single node.
 */
export function slotKey(namespace: string, identity: string, suffix = ""): string {
  return `${namespace}{${identity}}${suffix}`;
}
