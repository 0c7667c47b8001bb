import { and, eq } from "drizzle-orm";
import type { Executor, Tx } from "../db/client.ts";
import { plans, subscriptionHistory, subscriptions } from "../db/schema/billing.ts";
import { AppError } from "../errors.ts";
import type { TransitionContext } from "./billing-deps.ts";
import { DEFAULT_PLAN } from "./catalog.ts";
import type { SubscriptionEventInput, TransitionResult } from "./subscription-row.ts";
import type { SubscriptionState } from "./subscription-states.ts";
import {
  type PlanInfo,
  planTransition,
  refuseSource,
  type TransitionRefusal,
  targetPlanCode,
} from "./transition-plan.ts";
import { writeTransition } from "./write-transition.ts";

async function findPlan(db: Executor, code: string | undefined): Promise<PlanInfo | undefined> {
  if (!code) return undefined;
  const [plan] = await db
    .select({ code: plans.code, priceCents: plans.priceCents, system: plans.system })
    .from(plans)
    .where(eq(plans.code, code));
  return plan;
}

const refusalError = (r: TransitionRefusal) => new AppError(r.code, r.detail, { fields: r.fields });

/**
 * Applies one event to the tenant's subscription inside `tx`: locks the row, asks `planTransition`
 * (transition-plan.ts) what to do, and has `writeTransition` write it. A second delivery of an
 * external event changes nothing. The caller invalidates the tenant-features cache after commit.
 */
export async function transitionSubscription(
  tx: Tx,
  context: TransitionContext,
  tenantId: string,
  input: SubscriptionEventInput & { actorId: string | null },
): Promise<TransitionResult> {
  const sourceRefusal = refuseSource(input);
  if (sourceRefusal) throw refusalError(sourceRefusal);
  const now = context.clock.now();
  const [current] = await tx
    .select()
    .from(subscriptions)
    .where(eq(subscriptions.tenantId, tenantId))
    .for("update");
  const from: SubscriptionState = current?.status ?? "none";

  if (input.externalEventId) {
    const [seen] = await tx
      .select({ id: subscriptionHistory.id })
      .from(subscriptionHistory)
      .where(
        and(
          eq(subscriptionHistory.tenantId, tenantId),
          eq(subscriptionHistory.externalEventId, input.externalEventId),
        ),
      );
    if (seen && current)
      return { subscription: current, changed: false, from, to: current.status, historyId: seen.id };
  }

  const plan = planTransition({
    current: current ?? null,
    request: input,
    defaultPlan: DEFAULT_PLAN,
    plan: await findPlan(tx, targetPlanCode(current ?? null, input, DEFAULT_PLAN)),
    now,
    graceDays: context.graceDays,
  });
  if (!plan.ok) throw refusalError(plan.refusal);
  return writeTransition(tx, context, tenantId, input, current ?? null, plan.next);
}

/** The `subscription.event` audit entry of a transition that changed something. */
export const subscriptionAudit = (result: TransitionResult, event: string, source: string) =>
  ({
    action: "subscription.event",
    target: { type: "subscription", id: result.subscription.tenantId },
    details: { event, from: result.from, to: result.to, reason: source, plan: result.subscription.planCode },
  }) as const;
