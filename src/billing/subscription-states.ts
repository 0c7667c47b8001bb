import type { SubscriptionStatus } from "../db/schema/billing.ts";

/**
 * Subscription states and transitions (pure data; docs/billing.md shows the same table). A move is
 * decided by `planTransition` (transition-plan.ts) and written by `transitionSubscription`
 * (transition-subscription.ts), the ONE place a subscription changes: admin endpoints, the payment
 * webhook (`applySubscriptionEvent`) and the subscription loop (`runSubscriptionBatch`) all go
 * through it.
 */
export const subscriptionEvents = [
  "start_trial",
  "activate",
  "payment_succeeded",
  "payment_failed",
  "period_ended_unpaid",
  "grace_expired",
  "suspend",
  "cancel",
  "reactivate",
  "change_plan",
] as const;
export type SubscriptionEvent = (typeof subscriptionEvents)[number];

/** `none`: the tenant has no subscription row yet (it gets the default plan's features). */
export type SubscriptionState = SubscriptionStatus | "none";
export const subscriptionStates: SubscriptionState[] = [
  "none",
  "trialing",
  "active",
  "past_due",
  "suspended",
  "canceled",
];

/** state × event → next state; a missing entry is an invalid transition (409 `conflict`). */
export const transitionTable: Record<
  SubscriptionState,
  Partial<Record<SubscriptionEvent, SubscriptionStatus>>
> = {
  none: { start_trial: "trialing", activate: "active" },
  trialing: {
    activate: "active",
    payment_succeeded: "active",
    payment_failed: "past_due",
    period_ended_unpaid: "past_due",
    suspend: "suspended",
    cancel: "canceled",
    change_plan: "trialing",
  },
  active: {
    payment_succeeded: "active",
    payment_failed: "past_due",
    period_ended_unpaid: "past_due",
    suspend: "suspended",
    cancel: "canceled",
    change_plan: "active",
  },
  past_due: {
    payment_succeeded: "active",
    // a retried charge failing again keeps the grace that already runs (past_due_since unchanged)
    payment_failed: "past_due",
    grace_expired: "suspended",
    suspend: "suspended",
    cancel: "canceled",
    change_plan: "past_due",
  },
  suspended: { payment_succeeded: "active", reactivate: "active", cancel: "canceled" },
  canceled: { reactivate: "active" },
};

export type EventSource = "admin" | "webhook" | "loop";

/** Who may send which event: the loop alone decides that time ran out. */
export const eventSources: Record<EventSource, readonly SubscriptionEvent[]> = {
  admin: [
    "start_trial",
    "activate",
    "payment_succeeded",
    "payment_failed",
    "suspend",
    "cancel",
    "reactivate",
    "change_plan",
  ],
  webhook: ["activate", "payment_succeeded", "payment_failed", "cancel", "change_plan"],
  loop: ["period_ended_unpaid", "grace_expired"],
};

export function nextState(from: SubscriptionState, event: SubscriptionEvent): SubscriptionStatus | null {
  return transitionTable[from][event] ?? null;
}

export const DAY_MS = 24 * 60 * 60 * 1000;
export const DEFAULT_TRIAL_DAYS = 14;

/** When a past-due subscription's grace runs out: exactly `graceDays` × 24 h after it became past due. */
export function graceEndsAt(pastDueSince: Date, graceDays: number): Date {
  return new Date(pastDueSince.getTime() + graceDays * DAY_MS);
}

/** One calendar month later (UTC), clamped to the month's last day (Jan 31 → Feb 28/29). */
export function addMonthUtc(date: Date): Date {
  const d = new Date(date.getTime());
  const day = d.getUTCDate();
  d.setUTCDate(1);
  d.setUTCMonth(d.getUTCMonth() + 1);
  const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
  d.setUTCDate(Math.min(day, last));
  return d;
}
