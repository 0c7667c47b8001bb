import { eq, sql } from "drizzle-orm";
import type { Cache } from "../cache/port.ts";
import type { Clock } from "../clock.ts";
import { type Database, type Executor, execute } from "../db/client.ts";
import { features, type UsagePeriod } from "../db/schema/billing.ts";
import { AppError } from "../errors.ts";
import type { Logger } from "../telemetry/logger.ts";
import {
  counterLockName,
  counterTtlSeconds,
  incrIfExistsScript,
  LOCK_SPACE,
  ledgerTotal,
  lockCounter,
  periodAt,
  type UsagePeriodWindow,
  usageCounterKey,
} from "./counters.ts";
import { noteUsageThresholds } from "./thresholds.ts";

export interface UsageDeps {
  database: Database;
  cache: Cache | null;
  clock: Clock;
  logger: Logger;
}

export interface RecordUsageInput {
  tenantId: string;
  feature: string;
  /** Positive for monthly features; a feature that never resets (storage) also takes negative deltas. */
  quantity: number;
  /** Unique per tenant: a second event with the same key is not counted again. */
  idempotencyKey: string;
  /**
   * The tenant's limit of the feature as the caller just checked it (`assertFeature`; null:
   * unlimited): with the cached counter, the threshold check (src/usage/thresholds.ts) then skips
   * its lookup while usage stays under 80 % of it.
   */
  limit?: number | null;
}

export interface RecordUsageResult {
  /** false: an event with this idempotency key was already in the ledger; nothing was counted. */
  recorded: boolean;
  /** The cached counter after the increment, when the cache had one. */
  counter: number | null;
  period: string;
}

const featurePeriods = new Map<string, { kind: string; period: UsagePeriod }>();

async function meteredFeature(db: Executor, key: string): Promise<UsagePeriod> {
  let entry = featurePeriods.get(key);
  if (!entry) {
    const [row] = await db
      .select({ kind: features.kind, period: features.period })
      .from(features)
      .where(eq(features.key, key));
    if (row) {
      entry = row;
      featurePeriods.set(key, row);
    }
  }
  if (entry?.kind !== "metered")
    throw new AppError("validation_failed", "Not a metered feature.", {
      fields: [{ path: "feature", message: `"${key}" is not a metered feature` }],
    });
  return entry.period;
}

/**
 * Appends one usage event to the ledger (the truth) and adds it to the tenant's cached counter (for
 * fast limit checks). The increment runs inside the ledger transaction under a shared counter lock,
 * so a rebuild or reconciliation never interleaves with it. A duplicate idempotency key counts once.
 * A cache failure does not fail the call: the ledger has the event and reconciliation fixes the counter.
 * With `tx` the event joins the caller's transaction, so it commits or rolls back with the change it
 * counts; record it last there, as the counter is incremented before that transaction commits.
 */
export async function recordUsage(
  deps: UsageDeps,
  input: RecordUsageInput,
  tx?: Executor,
): Promise<RecordUsageResult> {
  const period = await meteredFeature(tx ?? deps.database.db, input.feature);
  if (
    !Number.isSafeInteger(input.quantity) ||
    input.quantity === 0 ||
    (period === "month" && input.quantity < 0)
  )
    throw new AppError("validation_failed", "The quantity is not valid.", {
      fields: [
        { path: "quantity", message: period === "month" ? "a positive integer" : "a non-zero integer" },
      ],
    });
  if (input.idempotencyKey.length === 0 || input.idempotencyKey.length > 200)
    throw new AppError("validation_failed", "The idempotency key is not valid.", {
      fields: [{ path: "idempotencyKey", message: "1 to 200 characters" }],
    });
  const now = deps.clock.now();
  const window = periodAt(period, now);
  const key = usageCounterKey(input.tenantId, input.feature, window);
  const nowText = now.toISOString();
  const startText = window.start.toISOString();
  const record = async (tx: Executor): Promise<RecordUsageResult> => {
    // one statement: the shared counter lock first (the inserts read from it), the event, and the
    // counter row reconciliation claims; the lock is held until commit, after the cache increment
    const [row] = await execute<{ inserted: number }>(
      tx,
      sql`with locked as materialized (
            select pg_advisory_xact_lock_shared(${LOCK_SPACE}, hashtext(${counterLockName(input.tenantId, input.feature, window)}))
          ),
          inserted as (
            insert into usage_events (tenant_id, feature_key, period_start, quantity, idempotency_key, occurred_at)
            select ${input.tenantId}::uuid, ${input.feature}, ${startText}::timestamptz, ${input.quantity}::bigint,
                   ${input.idempotencyKey}, ${nowText}::timestamptz
            from locked
            on conflict (tenant_id, idempotency_key) do nothing
            returning id
          ),
          counter as (
            insert into usage_counters (tenant_id, feature_key, period_start, period_end, created_at, updated_at)
            select ${input.tenantId}::uuid, ${input.feature}, ${startText}::timestamptz, ${window.end?.toISOString() ?? null}::timestamptz,
                   ${nowText}::timestamptz, ${nowText}::timestamptz
            from inserted
            on conflict (tenant_id, feature_key, period_start) do nothing
          )
          select count(*)::int as inserted from inserted`,
    );
    if (!row || Number(row.inserted) === 0) return { recorded: false, counter: null, period: window.label };
    let counter: number | null = null;
    if (deps.cache) {
      try {
        const value = await deps.cache.run(incrIfExistsScript, [key], [input.quantity]);
        counter = value === null || value === undefined || value === false ? null : Number(value);
      } catch (error) {
        deps.logger.warn("usage counter increment failed; reconciliation will correct it", {
          feature: input.feature,
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
    // the cached counter after this increment saves a ledger sum; without one the ledger is read
    await noteUsageThresholds(tx, deps, { ...input, window, used: counter });
    return { recorded: true, counter, period: window.label };
  };
  return tx ? record(tx) : deps.database.db.transaction(record);
}

/**
 * Current usage of a metered feature for limit checks: the cached counter, rebuilt from the ledger
 * when it is missing (under the exclusive counter lock, so no increment is lost). Without a cache,
 * or when the cache fails, the ledger is read.
 */
export async function currentUsage(
  deps: UsageDeps,
  tenantId: string,
  featureKey: string,
  period: UsagePeriod,
): Promise<number> {
  const now = deps.clock.now();
  const window = periodAt(period, now);
  const db = deps.database.db;
  if (!deps.cache) return ledgerTotal(db, tenantId, featureKey, window);
  const key = usageCounterKey(tenantId, featureKey, window);
  try {
    const hit = await deps.cache.get(key);
    if (hit !== null) return Number(hit);
  } catch (error) {
    deps.logger.warn("usage counter read failed; reading the ledger", {
      error: error instanceof Error ? error.message : String(error),
    });
    return ledgerTotal(db, tenantId, featureKey, window);
  }
  return rebuildCounter(deps, tenantId, featureKey, window);
}

/** Sets the counter to the ledger total while no increment is in flight; returns the total. */
export async function rebuildCounter(
  deps: UsageDeps,
  tenantId: string,
  featureKey: string,
  window: UsagePeriodWindow,
): Promise<number> {
  const cache = deps.cache;
  return deps.database.db.transaction(async (tx) => {
    await lockCounter(tx, tenantId, featureKey, window, "exclusive");
    const total = await ledgerTotal(tx, tenantId, featureKey, window);
    if (cache) {
      try {
        await cache.set(
          usageCounterKey(tenantId, featureKey, window),
          String(total),
          counterTtlSeconds(window, deps.clock.now()),
        );
      } catch (error) {
        deps.logger.warn("usage counter rebuild could not write the cache", {
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
    return total;
  });
}

export interface UsageSummary {
  feature: string;
  period: string;
  periodStart: Date;
  periodEnd: Date | null;
  /** The ledger's total (the truth). */
  used: number;
  /** What the cache holds (null: no counter, or no cache). */
  cached: number | null;
}

/** A tenant's usage of every metered feature in the current period: ledger and cached counter side by side. */
export async function getTenantUsage(deps: UsageDeps, tenantId: string): Promise<UsageSummary[]> {
  const now = deps.clock.now();
  const metered = await deps.database.db
    .select({ key: features.key, period: features.period })
    .from(features)
    .where(eq(features.kind, "metered"))
    .orderBy(features.key);
  const out: UsageSummary[] = [];
  for (const feature of metered) {
    const window = periodAt(feature.period, now);
    const used = await ledgerTotal(deps.database.db, tenantId, feature.key, window);
    let cachedValue: number | null = null;
    if (deps.cache) {
      const hit = await deps.cache.get(usageCounterKey(tenantId, feature.key, window)).catch(() => null);
      cachedValue = hit === null ? null : Number(hit);
    }
    out.push({
      feature: feature.key,
      period: window.label,
      periodStart: window.start,
      periodEnd: window.end,
      used,
      cached: cachedValue,
    });
  }
  return out;
}
