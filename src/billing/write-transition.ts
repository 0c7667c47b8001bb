import { eq, sql } from "drizzle-orm";
import type { Tx } from "../db/client.ts";
import { subscriptionHistory, subscriptions } from "../db/schema/billing.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueue } from "../jobs/enqueue.ts";
import type { TransitionContext } from "./billing-deps.ts";
import { subscriptionChanged } from "./notifications.ts";
import type { Subscription, SubscriptionEventInput, TransitionResult } from "./subscription-row.ts";
import type { SubscriptionFields } from "./transition-plan.ts";

/** Another transaction created the tenant's first subscription meanwhile: the event is retried on it. */
export class ConcurrentCreateError extends AppError {
  constructor() {
    super("conflict", "The subscription was created concurrently; retry.");
  }
}

/** Writes the subscription row: updates the current one, or inserts the tenant's first. */
async function writeRow(
  tx: Tx,
  tenantId: string,
  current: Subscription | null,
  next: SubscriptionFields,
  now: Date,
): Promise<Subscription> {
  let row: Subscription | undefined;
  if (current) {
    [row] = await tx
      .update(subscriptions)
      .set({ ...next, version: sql`${subscriptions.version} + 1`, updatedAt: now })
      .where(eq(subscriptions.id, current.id))
      .returning();
  } else {
    [row] = await tx
      .insert(subscriptions)
      .values({ tenantId, ...next, createdAt: now, updatedAt: now })
      .onConflictDoNothing({ target: subscriptions.tenantId })
      .returning();
    if (!row) throw new ConcurrentCreateError();
  }
  if (!row) throw new Error("subscription write returned no row");
  return row;
}

/**
 * Writes a planned transition inside `tx`: the row, its history entry, the notification job and
 * the `subscription.changed` webhook event.
 */
export async function writeTransition(
  tx: Tx,
  context: TransitionContext,
  tenantId: string,
  input: SubscriptionEventInput & { actorId: string | null },
  current: Subscription | null,
  next: SubscriptionFields,
): Promise<TransitionResult> {
  const now = context.clock.now();
  const row = await writeRow(tx, tenantId, current, next, now);
  // what changed, as the history row records it and the subscription.changed job carries it
  const change = {
    tenantId,
    subscriptionId: row.id,
    event: input.event,
    fromStatus: current?.status ?? null,
    toStatus: row.status,
    fromPlan: current?.planCode ?? null,
    toPlan: row.planCode,
    source: input.source,
  };
  const [history] = await tx
    .insert(subscriptionHistory)
    .values({
      ...change,
      actorId: input.actorId,
      externalEventId: input.externalEventId ?? null,
      reason: input.reason ?? "",
      occurredAt: now,
    })
    .returning({ id: subscriptionHistory.id });
  if (!history) throw new Error("history insert returned no row");

  await enqueue(
    tx,
    { clock: context.clock, defaultMaxAttempts: context.defaultMaxAttempts },
    subscriptionChanged,
    { ...change, historyId: history.id },
  );
  await emitEvent(tx, context, { tenantId, type: "subscription.changed", data: change });
  return {
    subscription: row,
    changed: true,
    from: current?.status ?? "none",
    to: row.status,
    historyId: history.id,
  };
}
