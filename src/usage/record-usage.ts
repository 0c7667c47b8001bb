import { eq, sql } from "drizzle-orm";
import type { TenantCtx } from "../context.ts";
import { type Executor, execute, type Tx } from "../db/client.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { features, type UsagePeriod } from "../db/schema/billing.ts";
import { AppError } from "../errors.ts";
import {
  counterLockName,
  incrIfExistsScript,
  LOCK_SPACE,
  periodAt,
  type UsageDeps,
  type UsagePeriodWindow,
  usageCounterKey,
} from "./counters.ts";
import { noteUsageThresholds } from "./thresholds.ts";

export interface RecordUsageInput {
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

function checkInput(input: RecordUsageInput, period: UsagePeriod): void {
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
}

/**
 * One statement: the shared counter lock first (the inserts read from it), the event, and the
 * counter row reconciliation claims; the lock is held until commit, after the cache increment.
 * Resolves whether the event was new.
 */
async function insertEvent(
  tx: Executor,
  tenantId: string,
  input: RecordUsageInput,
  window: UsagePeriodWindow,
  now: Date,
): Promise<boolean> {
  const nowText = now.toISOString();
  const startText = window.start.toISOString();
  const [row] = await execute<{ inserted: number }>(
    tx,
    sql`with locked as materialized (
          select pg_advisory_xact_lock_shared(${LOCK_SPACE}, hashtext(${counterLockName(tenantId, input.feature, window)}))
        ),
        inserted as (
          insert into usage_events (tenant_id, feature_key, period_start, quantity, idempotency_key, occurred_at)
          select ${tenantId}::uuid, ${input.feature}, ${startText}::timestamptz, ${input.quantity}::bigint,
                 ${input.idempotencyKey}, ${nowText}::timestamptz
          from locked
          on conflict (tenant_id, idempotency_key) do nothing
          returning id
        ),
        counter as (
          insert into usage_counters (tenant_id, feature_key, period_start, period_end, created_at, updated_at)
          select ${tenantId}::uuid, ${input.feature}, ${startText}::timestamptz, ${window.end?.toISOString() ?? null}::timestamptz,
                 ${nowText}::timestamptz, ${nowText}::timestamptz
          from inserted
          on conflict (tenant_id, feature_key, period_start) do nothing
        )
        select count(*)::int as inserted from inserted`,
  );
  return row !== undefined && Number(row.inserted) > 0;
}

/** Adds the event to the cached counter when the cache has one; the counter after it, else null. */
async function incrementCounter(
  deps: UsageDeps,
  key: string,
  input: RecordUsageInput,
): Promise<number | null> {
  if (!deps.cache) return null;
  try {
    const value = await deps.cache.run(incrIfExistsScript, [key], [input.quantity]);
    return value === null || value === undefined || value === false ? null : Number(value);
  } catch (error) {
    deps.logger.warn("usage counter increment failed; reconciliation will correct it", {
      feature: input.feature,
      error: error instanceof Error ? error.message : String(error),
    });
    return null;
  }
}

/**
 * Appends one usage event of the ctx's tenant to the ledger (the truth) and adds it to the tenant's
 * cached counter (for fast limit checks). The increment runs inside the ledger transaction under a
 * shared counter lock, so a rebuild or reconciliation never interleaves with it. A duplicate
 * idempotency key counts once. A cache failure does not fail the call: the ledger has the event and
 * reconciliation fixes the counter. In a ctx that carries a transaction the event joins it, so it
 * commits or rolls back with the change it counts; record it last there, as the counter is
 * incremented before that transaction commits.
 */
export async function recordUsage(
  deps: UsageDeps,
  ctx: TenantCtx,
  input: RecordUsageInput,
): Promise<RecordUsageResult> {
  const { tenantId } = ctx;
  const period = await withDatabase(deps, ctx, (db) => meteredFeature(db, input.feature));
  checkInput(input, period);
  const now = deps.clock.now();
  const window = periodAt(period, now);
  return withTransaction(deps, ctx, async (tx) => {
    if (!(await insertEvent(tx, tenantId, input, window, now)))
      return { recorded: false, counter: null, period: window.label };
    const counter = await incrementCounter(deps, usageCounterKey(tenantId, input.feature, window), input);
    // the cached counter after this increment saves a ledger sum; without one the ledger is read
    await noteUsageThresholds(tx, deps, { ...input, tenantId, window, used: counter });
    return { recorded: true, counter, period: window.label };
  });
}

/**
 * The all-time count of a resource a tenant holds (`custom_domains`, `webhook_endpoints`): +1 when
 * one is added, −1 when one is removed, whoever did it. Keyed by the resource's id, so a retried
 * call never counts twice; recorded in the transaction (the ctx's) that adds or removes it.
 */
export async function countResource(
  deps: UsageDeps,
  ctx: TenantCtx & { tx: Tx },
  input: { feature: string; id: string; quantity: 1 | -1 },
): Promise<void> {
  const { feature, id, quantity } = input;
  await recordUsage(deps, ctx, {
    feature,
    quantity,
    idempotencyKey: `${feature}:${quantity > 0 ? "added" : "removed"}:${id}`,
  });
}
