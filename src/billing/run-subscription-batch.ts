import { and, eq, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { invalidate, tenantFeaturesKey } from "../cache/read-through.ts";
import { type Ctx, systemCtx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import { withPlatformDatabase, withTransaction } from "../db/operation.ts";
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

/** Which subscriptions time moves on: the loop's condition, read again under each row's lock. */
const dueCondition = (input: { now: Date; graceCutoff: Date }) =>
  sql`((${subscriptions.status} in ('trialing', 'active') and ${subscriptions.currentPeriodEnd} <= ${input.now.toISOString()}::timestamptz)
      or (${subscriptions.status} = 'past_due' and ${subscriptions.pastDueSince} <= ${input.graceCutoff.toISOString()}::timestamptz))`;

/** Up to `batchSize` due subscriptions across tenants, the longest untouched first (one statement, no lock). */
function listDueSubscriptions(db: Executor, input: { now: Date; graceCutoff: Date; batchSize: number }) {
  return db
    .select({ tenantId: subscriptions.tenantId })
    .from(subscriptions)
    .where(dueCondition(input))
    .orderBy(subscriptions.updatedAt)
    .limit(input.batchSize);
}

/** The tenant's subscription if it is still due and no other process holds it (`FOR UPDATE SKIP LOCKED`). */
async function claimDueSubscription(tx: Tx, tenantId: string, input: { now: Date; graceCutoff: Date }) {
  const [row] = await tx
    .select({ tenantId: subscriptions.tenantId, status: subscriptions.status })
    .from(subscriptions)
    .where(and(eq(subscriptions.tenantId, tenantId), dueCondition(input)))
    .for("update", { skipLocked: true });
  return row;
}

/** Moves one claimed subscription in a savepoint of its transaction; null when it could not move (sent to the back). */
async function moveSubscription(
  deps: BillingDeps,
  tx: Tx,
  context: TransitionContext,
  row: { tenantId: string; status: string },
  now: Date,
): Promise<TransitionResult | null> {
  const event: SubscriptionEvent = row.status === "past_due" ? "grace_expired" : "period_ended_unpaid";
  try {
    // a savepoint: a move that fails still leaves the row sent to the back
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
 * `past_due_since`) become `suspended`. The due ones are listed on the named platform path; each is
 * then claimed `FOR UPDATE SKIP LOCKED` and moved in a transaction of its tenant's context, so any
 * number of processes can run it; a second pass finds nothing left to do. Each change goes through
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
  const due = { now, graceCutoff };
  // across tenants: the named platform path lists what is due; each move runs in its tenant's context
  const listed = await withPlatformDatabase(deps, ctx, (db) =>
    listDueSubscriptions(db, { ...due, batchSize: input.batchSize }),
  );
  const changed: TransitionResult[] = [];
  for (const { tenantId } of listed) {
    const moved = await withTransaction(deps, { ...ctx, tenantId }, async (tx) => {
      // moved or taken by another process since it was listed: not this one's
      const row = await claimDueSubscription(tx, tenantId, due);
      return row ? moveSubscription(deps, tx, context, row, now) : null;
    });
    if (moved) changed.push(moved);
  }
  const claimed = listed.length;
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
