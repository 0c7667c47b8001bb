import { eq, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { invalidate, tenantFeaturesKey } from "../cache/read-through.ts";
import { type Ctx, systemCtx } from "../context.ts";
import type { Tx } from "../db/client.ts";
import { withTransaction } from "../db/operation.ts";
import { subscriptions } from "../db/schema/billing.ts";
import { type BillingDeps, type TransitionContext, transitionContext } from "./billing-deps.ts";
import type { TransitionResult } from "./subscription-row.ts";
import { DAY_MS, type SubscriptionEvent } from "./subscription-states.ts";
import { subscriptionAudit, transitionSubscription } from "./transition-subscription.ts";

export interface SubscriptionPassResult {
  changed: TransitionResult[];
  /** A full batch was due: run again at once. */
  more: boolean;
}

/** Claims up to `batchSize` subscriptions that time moves on, `FOR UPDATE SKIP LOCKED` (one statement). */
function claimDueSubscriptions(tx: Tx, input: { now: Date; graceCutoff: Date; batchSize: number }) {
  return tx
    .select({ tenantId: subscriptions.tenantId, status: subscriptions.status })
    .from(subscriptions)
    .where(
      sql`(${subscriptions.status} in ('trialing', 'active') and ${subscriptions.currentPeriodEnd} <= ${input.now.toISOString()}::timestamptz)
          or (${subscriptions.status} = 'past_due' and ${subscriptions.pastDueSince} <= ${input.graceCutoff.toISOString()}::timestamptz)`,
    )
    .orderBy(subscriptions.updatedAt)
    .limit(input.batchSize)
    .for("update", { skipLocked: true });
}

/** Moves one claimed subscription in a savepoint; null when it could not move (sent to the back). */
async function moveSubscription(
  deps: BillingDeps,
  tx: Tx,
  context: TransitionContext,
  row: { tenantId: string; status: string },
  now: Date,
): Promise<TransitionResult | null> {
  const event: SubscriptionEvent = row.status === "past_due" ? "grace_expired" : "period_ended_unpaid";
  try {
    // a savepoint per subscription: one that cannot move does not hold up the batch
    return await tx.transaction(async (sp) => {
      const applied = await transitionSubscription(sp, context, row.tenantId, {
        event,
        source: "loop",
        actorId: null,
      });
      if (applied.changed)
        await recordAudit(
          sp,
          systemCtx("subscriptions", row.tenantId),
          subscriptionAudit(applied, event, "loop"),
        );
      return applied;
    });
  } catch (error) {
    // to the back of the queue: rows that fail every time must not starve the rest
    await tx.update(subscriptions).set({ updatedAt: now }).where(eq(subscriptions.tenantId, row.tenantId));
    deps.logger.warn("subscription transition failed", { tenantId: row.tenantId, event, error });
    return null;
  }
}

/**
 * One batch of the subscription loop: trialing/active subscriptions whose period ended unpaid become
 * `past_due`; `past_due` ones whose grace ran out (at exactly `PastDueGraceDays` × 24 h after
 * `past_due_since`) become `suspended`. Rows are claimed `FOR UPDATE SKIP LOCKED`, so any number of
 * processes can run it; a second pass finds nothing left to do. Each change goes through
 * `transitionSubscription` (history, notification job) and drops the tenant's cached features after
 * commit.
 */
export async function runSubscriptionBatch(
  deps: BillingDeps,
  ctx: Ctx,
  input: { batchSize: number },
): Promise<SubscriptionPassResult> {
  const context = transitionContext(deps);
  const now = context.clock.now();
  const graceCutoff = new Date(now.getTime() - context.graceDays * DAY_MS);
  const { changed, claimed } = await withTransaction(deps, ctx, async (tx) => {
    const due = await claimDueSubscriptions(tx, { now, graceCutoff, batchSize: input.batchSize });
    const results: TransitionResult[] = [];
    for (const row of due) {
      const moved = await moveSubscription(deps, tx, context, row, now);
      if (moved) results.push(moved);
    }
    return { changed: results, claimed: due.length };
  });
  if (changed.length > 0) {
    await invalidate(
      deps.cache,
      changed.map((r) => tenantFeaturesKey(r.subscription.tenantId)),
      { logger: deps.logger },
    );
    deps.logger.info("subscriptions moved by the loop", {
      count: changed.length,
      moves: changed.map((r) => ({ tenantId: r.subscription.tenantId, from: r.from, to: r.to })),
    });
  }
  return { changed, more: claimed >= input.batchSize && changed.length > 0 };
}
