import { and, eq, sql } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import { withPlatformDatabase, withTransaction } from "../db/operation.ts";
import { features, type UsagePeriod, usageCounters, usageReconciliations } from "../db/schema/billing.ts";
import { workerId as newWorkerId } from "../runtime/worker-id.ts";
import {
  counterTtlSeconds,
  ledgerTotal,
  lockCounter,
  type UsageDeps,
  usageCounterKey,
  windowOf,
} from "./counters.ts";

/** A counter whose lease another pass took over while this one waited. */
const LOST = Symbol("lost");

export interface Correction {
  tenantId: string;
  feature: string;
  period: string;
  ledgerTotal: number;
  /** null: the counter was missing. */
  cachedBefore: number | null;
  reason: "missing" | "drift";
}

export interface ReconcilePassResult {
  claimed: number;
  reconciled: number;
  corrections: Correction[];
  /** A full batch was claimed: there may be more due now. */
  more: boolean;
}

export interface ReconcileOptions {
  batchSize: number;
  /** `FeatureUsageReconciliation:IntervalMinutes` in ms: a counter is due when its last pass is older than half of it. */
  intervalMs: number;
  workerId?: string;
  /** Lease on claimed counters; another process takes them over after it. Default 5 minutes. */
  leaseMs?: number;
}

interface ClaimedRow {
  id: string | number;
  tenant_id: string;
  feature_key: string;
  period_start: string | Date;
  period_end: string | Date | null;
  period: UsagePeriod;
}

/** Claims up to `batchSize` due counters for `workerId` until `leaseUntil` (one statement). */
async function claimDueCounters(
  db: Executor,
  input: { now: Date; dueBefore: Date; leaseUntil: Date; workerId: string; batchSize: number },
): Promise<ClaimedRow[]> {
  const nowText = input.now.toISOString();
  return execute<ClaimedRow>(
    db,
    sql`with due as materialized (
          select c.id from ${usageCounters} c
          where (c.locked_until is null or c.locked_until <= ${nowText}::timestamptz)
            and (c.reconciled_at is null or c.reconciled_at <= ${input.dueBefore.toISOString()}::timestamptz)
            and (c.period_end is null or c.period_end > ${nowText}::timestamptz)
          order by c.reconciled_at nulls first, c.id
          limit ${input.batchSize}
          for update skip locked
        )
        update ${usageCounters} c set locked_by = ${input.workerId}, locked_until = ${input.leaseUntil.toISOString()}::timestamptz
        from due, ${features} f
        where c.id = due.id and f.key = c.feature_key
        returning c.id, c.tenant_id, c.feature_key, c.period_start, c.period_end, f.period`,
  );
}

/**
 * Reconciles one claimed counter in its own transaction: under the exclusive counter lock, and
 * only while the claim is still this worker's, it recomputes the ledger total, corrects the cached
 * counter when it is missing or differs (recording the correction), and releases the claim.
 */
async function reconcileCounter(
  deps: UsageDeps,
  ctx: Ctx,
  row: ClaimedRow,
  input: { workerId: string; now: Date },
): Promise<Correction | null | typeof LOST> {
  const window = windowOf(
    row.period,
    new Date(row.period_start),
    row.period_end === null ? null : new Date(row.period_end),
  );
  const { workerId, now } = input;
  // the counter's tenant's context: its ledger, counter and correction rows
  return withTransaction(deps, { ...ctx, tenantId: row.tenant_id }, async (tx) => {
    await lockCounter(tx, row.tenant_id, row.feature_key, window, "exclusive");
    // still ours? A pass whose lease ran out and was taken over records nothing (no second
    // correction row); the row lock keeps it ours until this transaction ends
    const [mine] = await tx
      .select({ id: usageCounters.id })
      .from(usageCounters)
      .where(and(eq(usageCounters.id, Number(row.id)), eq(usageCounters.lockedBy, workerId)))
      .for("update");
    if (!mine) return LOST;
    const total = await ledgerTotal(tx, row.tenant_id, row.feature_key, window);
    let fixed: Correction | null = null;
    if (deps.cache) {
      const key = usageCounterKey(row.tenant_id, row.feature_key, window);
      const hit = await deps.cache.get(key);
      const before = hit === null ? null : Number(hit);
      if (before !== total) {
        await deps.cache.set(key, String(total), counterTtlSeconds(window, deps.clock.now()));
        fixed = {
          tenantId: row.tenant_id,
          feature: row.feature_key,
          period: window.label,
          ledgerTotal: total,
          cachedBefore: before,
          reason: before === null ? "missing" : "drift",
        };
        await tx.insert(usageReconciliations).values({
          tenantId: row.tenant_id,
          featureKey: row.feature_key,
          periodStart: window.start,
          ledgerTotal: total,
          cachedBefore: before,
          drift: before === null ? null : before - total,
          reason: fixed.reason,
          correctedAt: now,
        });
      }
    }
    await tx
      .update(usageCounters)
      .set({ ledgerTotal: total, reconciledAt: now, lockedBy: null, lockedUntil: null, updatedAt: now })
      .where(and(eq(usageCounters.id, Number(row.id)), eq(usageCounters.lockedBy, workerId)));
    return fixed;
  });
}

/**
 * One reconciliation batch: claims due counters (tenant × feature × current period) with a lease
 * (`FOR UPDATE SKIP LOCKED`, so several processes share the work), recomputes each total from the
 * ledger under the exclusive counter lock, corrects the cached counter when it is missing or differs,
 * records each correction in `usage_reconciliations`, and notes the ledger total and time.
 */
export async function reconcileUsageBatch(
  deps: UsageDeps,
  ctx: Ctx,
  options: ReconcileOptions,
): Promise<ReconcilePassResult> {
  const now = deps.clock.now();
  const workerId = options.workerId ?? newWorkerId();
  // across tenants: the named platform path claims; each counter is then reconciled in its tenant's context
  const claimed = await withPlatformDatabase(deps, ctx, (db) =>
    claimDueCounters(db, {
      now,
      dueBefore: new Date(now.getTime() - Math.floor(options.intervalMs / 2)),
      leaseUntil: new Date(now.getTime() + (options.leaseMs ?? 5 * 60_000)),
      workerId,
      batchSize: options.batchSize,
    }),
  );
  const corrections: Correction[] = [];
  let reconciled = 0;
  for (const row of claimed) {
    try {
      const correction = await reconcileCounter(deps, ctx, row, { workerId, now });
      if (correction === LOST) continue;
      reconciled++;
      if (correction) corrections.push(correction);
    } catch (error) {
      // the lease runs out and the next pass retries this counter
      deps.logger.warn("usage reconciliation of a counter failed", {
        tenantId: row.tenant_id,
        feature: row.feature_key,
        error,
      });
    }
  }
  if (corrections.length > 0)
    deps.logger.info("usage counters corrected", {
      count: corrections.length,
      corrections: corrections.map((c) => ({
        tenantId: c.tenantId,
        feature: c.feature,
        period: c.period,
        reason: c.reason,
        drift: c.cachedBefore === null ? null : c.cachedBefore - c.ledgerTotal,
      })),
    });
  return { claimed: claimed.length, reconciled, corrections, more: claimed.length >= options.batchSize };
}

/** Batches until nothing is due: one full reconciliation pass of this process. */
export async function reconcileUsage(
  deps: UsageDeps,
  ctx: Ctx,
  options: ReconcileOptions,
): Promise<ReconcilePassResult> {
  const total: ReconcilePassResult = { claimed: 0, reconciled: 0, corrections: [], more: false };
  for (;;) {
    const batch = await reconcileUsageBatch(deps, ctx, options);
    total.claimed += batch.claimed;
    total.reconciled += batch.reconciled;
    total.corrections.push(...batch.corrections);
    if (!batch.more || batch.reconciled === 0) return total;
  }
}
