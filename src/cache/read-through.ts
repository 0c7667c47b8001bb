import type { Logger } from "../telemetry/logger.ts";
import { type Cache, slotKey } from "./port.ts";
import { invalidateScript, setIfGenerationScript } from "./scripts.ts";

/**
 * Read-through caching of values whose truth is the database. A miss, an unreadable entry or an
 * unreachable cache all fall back to `load` (the cache is never authoritative); a value is cached
 * only after it was loaded. Without a cache (Development) this is just `load`, nothing is kept.
 *
 * Every entry has a generation (`<key>:gen`), bumped by `invalidate` together with the delete. On a
 * miss the reader notes the generation before loading and writes back only if it is unchanged
 * (atomically, in one script): a load that read the database before a change committed cannot put
 * the old value back after that change's invalidation. Such a reader still answers the value it
 * loaded (it was current when read); the next reader loads again.
 */
export async function cached<T>(
  cache: Cache | null,
  key: string,
  ttlSeconds: number,
  load: () => Promise<T>,
  options: { logger?: Logger } = {},
): Promise<T> {
  if (!cache) return load();
  let generation: string;
  try {
    const hit = await cache.get(key);
    if (hit !== null) return (JSON.parse(hit) as { v: T }).v;
    generation = String((await cache.get(generationKey(key))) ?? "");
  } catch (error) {
    options.logger?.warn("cache read failed; loading from the database", { key, error: messageOf(error) });
    return load();
  }
  const value = await load();
  try {
    await cache.run(
      setIfGenerationScript,
      [key, generationKey(key)],
      [generation, JSON.stringify({ v: value }), ttlSeconds],
    );
  } catch (error) {
    options.logger?.warn("cache write failed", { key, error: messageOf(error) });
  }
  return value;
}

/**
 * Drops cached entries after the truth changed (call it after the transaction commits) and bumps
 * their generations, so a load already in flight does not write its older value back. Resolves to
 * false when the cache could not be reached: the entry then lives until its TTL, which bounds how
 * stale it can be. Generations have no TTL (one small counter per invalidated entry): an expired
 * generation could come back to a value a reader saw.
 */
export async function invalidate(cache: Cache | null, keys: string[], options: { logger?: Logger } = {}) {
  if (!cache || keys.length === 0) return true;
  try {
    if (cache.cluster)
      // an entry and its generation share a slot (one hash tag); different entries may not
      await Promise.all(keys.map((key) => cache.run(invalidateScript, [key, generationKey(key)], [])));
    else
      await cache.run(
        invalidateScript,
        keys.flatMap((key) => [key, generationKey(key)]),
        [],
      );
    return true;
  } catch (error) {
    options.logger?.warn("cache invalidation failed; entries expire with their TTL", {
      keys,
      error: messageOf(error),
    });
    return false;
  }
}

/** The generation counter of a read-through entry (bumped by every invalidation). */
export function generationKey(key: string): string {
  return `${key}:gen`;
}

/** A tenant's effective features (plan + overrides), cached for `Cache:TenantFeaturesSeconds`. */
export function tenantFeaturesKey(tenantId: string): string {
  return slotKey("tenant-features:", tenantId);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
