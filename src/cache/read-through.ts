import type { Logger } from "../telemetry/logger.ts";
import type { Cache } from "./port.ts";

/**
 * Read-through caching of values whose truth is the database. A miss, an unreadable entry or an
 * unreachable cache all fall back to `load` (the cache is never authoritative); a value is cached
 * only after it was loaded. Without a cache (Development) this is just `load`.
 */
export async function cached<T>(
  cache: Cache | null,
  key: string,
  ttlSeconds: number,
  load: () => Promise<T>,
  options: { logger?: Logger } = {},
): Promise<T> {
  if (!cache) return load();
  try {
    const hit = await cache.get(key);
    if (hit !== null) return (JSON.parse(hit) as { v: T }).v;
  } catch (error) {
    options.logger?.warn("cache read failed; loading from the database", { key, error: messageOf(error) });
    return load();
  }
  const value = await load();
  try {
    await cache.set(key, JSON.stringify({ v: value }), ttlSeconds);
  } catch (error) {
    options.logger?.warn("cache write failed", { key, error: messageOf(error) });
  }
  return value;
}

/**
 * Drops cached entries after the truth changed (call it after the transaction commits). Resolves to
 * false when the cache could not be reached: the entry then lives until its TTL, which bounds how
 * stale it can be.
 */
export async function invalidate(cache: Cache | null, keys: string[], options: { logger?: Logger } = {}) {
  if (!cache || keys.length === 0) return true;
  try {
    await cache.del(...keys);
    return true;
  } catch (error) {
    options.logger?.warn("cache invalidation failed; entries expire with their TTL", {
      keys,
      error: messageOf(error),
    });
    return false;
  }
}

/** A tenant's effective features (plan + overrides), cached for `Cache:TenantFeaturesSeconds`. */
export function tenantFeaturesKey(tenantId: string): string {
  return `tenant-features:${tenantId}`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
