import { eq } from "drizzle-orm";
import type { Executor } from "../db/client.ts";
import { type SubscriptionStatus, subscriptions } from "../db/schema/billing.ts";
import type { SubscriptionState } from "./subscription-states.ts";
import type { TransitionRequest } from "./transition-plan.ts";

export type Subscription = typeof subscriptions.$inferSelect;

/** An event as a caller sends it; who sent it comes from the ctx (history `actor_id`). */
export interface SubscriptionEventInput extends TransitionRequest {
  /** The provider's event id: a second delivery of the same id changes nothing. */
  externalEventId?: string | null;
  reason?: string;
}

export interface TransitionResult {
  subscription: Subscription;
  /** false for a duplicate delivery of an external event. */
  changed: boolean;
  from: SubscriptionState;
  to: SubscriptionStatus;
  historyId: number | null;
}

/** The tenant's subscription row, or null when it has none yet (one statement). */
export async function findSubscription(db: Executor, tenantId: string): Promise<Subscription | null> {
  const [row] = await db.select().from(subscriptions).where(eq(subscriptions.tenantId, tenantId));
  return row ?? null;
}
