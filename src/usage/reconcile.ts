import { and, desc, eq, sql } from "drizzle-orm";
import type { TenantCtx } from "../context.ts";
import { execute } from "../db/client.ts";
import { features, type UsagePeriod, usageCounters, usageReconciliations } from "../db/schema/billing.ts";
import { workerId as newWorkerId } from "../runtime/worker-id.ts";
import { counterTtlSeconds, ledgerTotal, lockCounter, usageCounterKey, windowOf } from "./counters.ts";
import type { UsageDeps } from "./ledger.ts";

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

/**
 * One reconciliation batch: claims due counters (tenant × feature × current period) with a lease
 * (`FOR UPDATE SKIP LOCKED`, so several processes share the work), recomputes each total from the
 * ledger under the exclusive counter lock, corrects the cached counter when it is missing or differs,
 * records each correction in `usage_reconciliations`, and notes the ledger total and time.
 */
export async function reconcileUsageBatch(
  deps: UsageDeps,
  options: ReconcileOptions,
): Promise<ReconcilePassResult> {
  const db = deps.database.db;
  const now = deps.clock.now();
  const nowText = now.toISOString();
  const workerId = options.workerId ?? newWorkerId();
  const dueBefore = new Date(now.getTime() - Math.floor(options.intervalMs / 2)).toISOString();
  const leaseUntil = new Date(now.getTime() + (options.leaseMs ?? 5 * 60_000)).toISOString();
  const claimed = await execute<ClaimedRow>(
    db,
    sql`with due as materialized (
          select c.id from ${usageCounters} c
          where (c.locked_until is null or c.locked_until <= ${nowText}::timestamptz)
            and (c.reconciled_at is null or c.reconciled_at <= ${dueBefore}::timestamptz)
            and (c.period_end is null or c.period_end > ${nowText}::timestamptz)
          order by c.reconciled_at nulls first, c.id
          limit ${options.batchSize}
          for update skip locked
        )
        update ${usageCounters} c set locked_by = ${workerId}, locked_until = ${leaseUntil}::timestamptz
        from due, ${features} f
        where c.id = due.id and f.key = c.feature_key
        returning c.id, c.tenant_id, c.feature_key, c.period_start, c.period_end, f.period`,
  );
  const corrections: Correction[] = [];
  let reconciled = 0;
  for (const row of claimed) {
    const window = windowOf(
      row.period,
      new Date(row.period_start),
      row.period_end === null ? null : new Date(row.period_end),
    );
    try {
      const correction = await db.transaction(async (tx) => {
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
  options: ReconcileOptions,
): Promise<ReconcilePassResult> {
  const total: ReconcilePassResult = { claimed: 0, reconciled: 0, corrections: [], more: false };
  for (;;) {
    const batch = await reconcileUsageBatch(deps, options);
    total.claimed += batch.claimed;
    total.reconciled += batch.reconciled;
    total.corrections.push(...batch.corrections);
    if (!batch.more || batch.reconciled === 0) return total;
  }
}

/** The tenant's latest counter corrections (reconciliation found a missing or drifted counter), newest first. */
export async function listUsageCorrections(deps: UsageDeps, ctx: TenantCtx, input: { limit: number }) {
  return deps.database.db
    .select()
    .from(usageReconciliations)
    .where(eq(usageReconciliations.tenantId, ctx.tenantId))
    .orderBy(desc(usageReconciliations.id))
    .limit(input.limit);
}
