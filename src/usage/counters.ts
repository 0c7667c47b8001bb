import { sql } from "drizzle-orm";
import type { Cache } from "../cache/port.ts";
import { defineScript } from "../cache/scripts.ts";
import type { Clock } from "../clock.ts";
import { type Database, type Executor, execute } from "../db/client.ts";
import type { UsagePeriod } from "../db/schema/billing.ts";
import type { Logger } from "../telemetry/logger.ts";

/** What the usage operations need: the ledger, the cached counters, the clock. */
export interface UsageDeps {
  database: Database;
  cache: Cache | null;
  clock: Clock;
  logger: Logger;
}

/** A usage period of one metered feature: a calendar month (UTC), or all time for features that never reset. */
export interface UsagePeriodWindow {
  period: UsagePeriod;
  start: Date;
  /** null for `never`. */
  end: Date | null;
  /** `2026-11` or `all`: part of the cache key. */
  label: string;
}

export const EPOCH = new Date(0);

export function periodAt(period: UsagePeriod, now: Date): UsagePeriodWindow {
  if (period === "never") return { period, start: EPOCH, end: null, label: "all" };
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { period, start, end, label: start.toISOString().slice(0, 7) };
}

export function windowOf(period: UsagePeriod, start: Date, end: Date | null): UsagePeriodWindow {
  return { period, start, end, label: period === "never" ? "all" : start.toISOString().slice(0, 7) };
}

/** The cache key of a tenant's counter for one feature and period (the adapter adds the env prefix). */
export function usageCounterKey(tenantId: string, featureKey: string, window: UsagePeriodWindow): string {
  return `usage:${tenantId}:${featureKey}:${window.label}`;
}

/** Counters of a month live a week past the month's end; all-time counters do not expire. */
export function counterTtlSeconds(window: UsagePeriodWindow, now: Date): number {
  if (!window.end) return 0;
  return Math.max(60, Math.ceil((window.end.getTime() - now.getTime()) / 1000) + 7 * 24 * 3600);
}

/**
 * INCRBY only when the counter exists: a missing counter (evicted, flushed, never built) is rebuilt
 * from the ledger by the next read, never started from zero. Returns nil when it is missing.
 */
export const incrIfExistsScript = defineScript(
  "usage-incr-if-exists",
  `if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end
return false`,
);

export const LOCK_SPACE = 7_400_201;

export function counterLockName(tenantId: string, featureKey: string, window: UsagePeriodWindow): string {
  return `${tenantId}:${featureKey}:${window.label}`;
}

/**
 * Serialises counter writes against rebuilds of one tenant × feature × period: recorders take the
 * lock shared (they run in parallel), a rebuild or a reconciliation takes it exclusive, so it reads
 * the ledger and sets the counter while no increment is in flight. Transaction-scoped.
 */
export async function lockCounter(
  tx: Executor,
  tenantId: string,
  featureKey: string,
  window: UsagePeriodWindow,
  mode: "shared" | "exclusive",
): Promise<void> {
  const name = counterLockName(tenantId, featureKey, window);
  if (mode === "shared")
    await execute(tx, sql`select pg_advisory_xact_lock_shared(${LOCK_SPACE}, hashtext(${name}))`);
  else await execute(tx, sql`select pg_advisory_xact_lock(${LOCK_SPACE}, hashtext(${name}))`);
}

/** The ledger's total for a tenant × feature × period: the truth. */
export async function ledgerTotal(
  db: Executor,
  tenantId: string,
  featureKey: string,
  window: UsagePeriodWindow,
): Promise<number> {
  const [row] = await execute<{ total: string | number }>(
    db,
    sql`select coalesce(sum(quantity), 0)::bigint as total from usage_events
        where tenant_id = ${tenantId} and feature_key = ${featureKey}
          and period_start = ${window.start.toISOString()}::timestamptz`,
  );
  return Number(row?.total ?? 0);
}
