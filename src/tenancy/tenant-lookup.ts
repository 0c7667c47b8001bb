import { and, eq } from "drizzle-orm";
import { type Clock, epochMs, isFresh } from "../clock.ts";
import { systemCtx } from "../context.ts";
import type { Db } from "../db/client.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import { tenantDomains, tenants } from "../db/schema/index.ts";

const TTL_MS = 30_000;

/** The tenant a request acts in, resolved from its host or tenant-code path. */
export interface ResolvedTenant {
  id: string;
  code: string;
}

export interface TenantLookup {
  /** The tenant an Active custom domain belongs to (the tenant itself Active), or null. */
  byDomain(host: string): Promise<ResolvedTenant | null>;
  /** An Active tenant by its code, or null. */
  byCode(code: string): Promise<ResolvedTenant | null>;
  /** Forget cached answers (after a domain or tenant changes in this process). */
  clear(): void;
}

/** How many answers the lookup cache keeps; past it the least recently used goes first. */
export const TENANT_LOOKUP_ENTRIES = 10_000;

/** Whose a host or code is: asked before the request's tenant is known, so a named platform lookup. */
const TENANT_LOOKUP = systemCtx("tenant lookup");

/**
 * Lookups on every request's hot path, cached in-process for 30 s, answers for unknown hosts and
 * codes too (negatively), in a bounded LRU: a flood of made-up names evicts the oldest entries one
 * by one, never the whole cache, so the names in use stay cached. An answer stamped by a clock
 * since put back is asked again (`isFresh`), not kept for the TTL plus the step.
 */
export function createTenantLookup(db: Db, clock: Clock, maxEntries = TENANT_LOOKUP_ENTRIES): TenantLookup {
  const platform = { database: { db } };
  // a Map iterates in insertion order: a hit is moved to the end, the first key is the oldest
  const cache = new Map<string, { value: ResolvedTenant | null; at: number }>();
  const cached = async (key: string, load: () => Promise<ResolvedTenant | null>) => {
    const now = epochMs(clock);
    const hit = cache.get(key);
    if (hit && isFresh(hit.at, TTL_MS, now)) {
      cache.delete(key);
      cache.set(key, hit);
      return hit.value;
    }
    const value = await load();
    cache.delete(key);
    while (cache.size >= maxEntries) {
      const oldest = cache.keys().next();
      if (oldest.done) break;
      cache.delete(oldest.value);
    }
    cache.set(key, { value, at: now });
    return value;
  };
  return {
    byDomain: (host) =>
      cached(`d:${host}`, async () => {
        const [row] = await withPlatformDatabase(platform, TENANT_LOOKUP, (db) =>
          db
            .select({ id: tenants.id, code: tenants.code })
            .from(tenantDomains)
            .innerJoin(tenants, eq(tenants.id, tenantDomains.tenantId))
            .where(
              and(
                eq(tenantDomains.hostname, host),
                eq(tenantDomains.status, "Active"),
                eq(tenants.status, "Active"),
              ),
            )
            .limit(1),
        );
        return row ?? null;
      }),
    byCode: (code) =>
      cached(`c:${code.toLowerCase()}`, async () => {
        const [row] = await withPlatformDatabase(platform, TENANT_LOOKUP, (db) =>
          db
            .select({ id: tenants.id, code: tenants.code })
            .from(tenants)
            .where(and(eq(tenants.code, code.toLowerCase()), eq(tenants.status, "Active")))
            .limit(1),
        );
        return row ?? null;
      }),
    clear: () => cache.clear(),
  };
}
