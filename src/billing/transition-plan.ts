import type { SubscriptionStatus } from "../db/schema/billing.ts";
import type { FieldError } from "../errors.ts";
import {
  addMonthUtc,
  DAY_MS,
  DEFAULT_TRIAL_DAYS,
  type EventSource,
  eventSources,
  graceEndsAt,
  nextState,
  type SubscriptionEvent,
  type SubscriptionState,
} from "./subscription-states.ts";

/**
 * The pure half of a subscription event: from the current row, the event and the clock, what the
 * row must become (or why not). No I/O: transition-subscription.ts reads the row and the plan,
 * write-transition.ts writes what this returns.
 */

/** The columns a transition reads and writes. */
export interface SubscriptionFields {
  planCode: string;
  status: SubscriptionStatus;
  currentPeriodStart: Date;
  currentPeriodEnd: Date | null;
  pastDueSince: Date | null;
  suspendedAt: Date | null;
  canceledAt: Date | null;
  externalRef: string | null;
}

export interface TransitionRequest {
  event: SubscriptionEvent;
  source: EventSource;
  /** Target plan: required for `change_plan`, optional for `start_trial`/`activate`. */
  plan?: string;
  periodStart?: Date;
  periodEnd?: Date;
  externalRef?: string | null;
}

/** A catalog plan as the plan store found it (`undefined`: no plan with that code). */
export interface PlanInfo {
  code: string;
  priceCents: number;
  system: boolean;
}

export interface TransitionInputs {
  /** The tenant's row, null when it has none yet (`none`). */
  current: SubscriptionFields | null;
  request: TransitionRequest;
  /** The plan an event names none of: the tenant's current one, else this. */
  defaultPlan: string;
  /** The catalog's plan named by `targetPlanCode(current, request, defaultPlan)`; undefined: none. */
  plan: PlanInfo | undefined;
  now: Date;
  graceDays: number;
}

/** Why an event is refused: the error code and detail (and fields) the caller answers with. */
export interface TransitionRefusal {
  code: "bad_request" | "conflict" | "validation_failed";
  detail: string;
  fields?: FieldError[];
}

export type TransitionPlan =
  | { ok: true; from: SubscriptionState; to: SubscriptionStatus; next: SubscriptionFields }
  | { ok: false; refusal: TransitionRefusal };

const refuse = (refusal: TransitionRefusal): TransitionPlan => ({ ok: false, refusal });

/** Whether `source` may send `event` at all (checked before the row is read). */
export function refuseSource(request: TransitionRequest): TransitionRefusal | null {
  if (eventSources[request.source].includes(request.event)) return null;
  return { code: "bad_request", detail: `The event "${request.event}" cannot come from ${request.source}.` };
}

/** The plan the subscription will be on; undefined when `change_plan` names none. */
export function targetPlanCode(
  current: Pick<SubscriptionFields, "planCode"> | null,
  request: TransitionRequest,
  defaultPlan: string,
): string | undefined {
  if (request.event === "change_plan") return request.plan;
  if (request.event === "start_trial" || request.event === "activate")
    return request.plan ?? current?.planCode ?? defaultPlan;
  return current?.planCode ?? defaultPlan;
}

function invalid(from: SubscriptionState, event: SubscriptionEvent, why?: string): TransitionPlan {
  return refuse({
    code: "conflict",
    detail: why ?? `A subscription in state "${from}" does not accept the event "${event}".`,
  });
}

/** Thrown inside `planTransition` only, to leave the period arithmetic early; never escapes it. */
class Refused {
  constructor(readonly refusal: TransitionRefusal) {}
}

/**
 * Decides one transition (see `transitionTable`): the table, the event's guard (the loop's events
 * hold only once time ran out), the plan, and the new field values. Refusals come in the order the
 * checks run: conflict (table, guards), then plan, then period.
 */
export function planTransition(inputs: TransitionInputs): TransitionPlan {
  const { current, request, now } = inputs;
  const from: SubscriptionState = current?.status ?? "none";
  const to = nextState(from, request.event);
  if (!to) return invalid(from, request.event);

  if (request.event === "period_ended_unpaid") {
    if (!current?.currentPeriodEnd || current.currentPeriodEnd.getTime() > now.getTime())
      return invalid(from, request.event, "The current period has not ended.");
  }
  if (request.event === "grace_expired") {
    if (
      !current?.pastDueSince ||
      graceEndsAt(current.pastDueSince, inputs.graceDays).getTime() > now.getTime()
    )
      return invalid(from, request.event, "The past-due grace period has not run out.");
  }

  const planCode = targetPlanCode(current, request, inputs.defaultPlan);
  if (!planCode)
    return refuse({
      code: "validation_failed",
      detail: "A plan is required.",
      fields: [{ path: "plan", message: "required for change_plan" }],
    });
  const plan = inputs.plan?.code === planCode ? inputs.plan : undefined;
  if (!plan || plan.system)
    return refuse({
      code: "validation_failed",
      detail: "No such plan.",
      fields: [{ path: "plan", message: `unknown plan "${planCode}"` }],
    });
  const paid = plan.priceCents > 0;
  if (request.event === "start_trial" && !paid)
    return refuse({
      code: "validation_failed",
      detail: "A trial needs a paid plan.",
      fields: [{ path: "plan", message: `"${plan.code}" is free` }],
    });
  try {
    return { ok: true, from, ...nextFields(inputs, from, to, plan.code, paid) };
  } catch (error) {
    if (error instanceof Refused) return refuse(error.refusal);
    throw error;
  }
}

function nextFields(
  inputs: TransitionInputs,
  from: SubscriptionState,
  to: SubscriptionStatus,
  planCode: string,
  paid: boolean,
): { to: SubscriptionStatus; next: SubscriptionFields } {
  const { current, request, now } = inputs;
  const next: SubscriptionFields = {
    planCode,
    status: to,
    currentPeriodStart: current?.currentPeriodStart ?? now,
    currentPeriodEnd: current?.currentPeriodEnd ?? null,
    pastDueSince: current?.pastDueSince ?? null,
    suspendedAt: current?.suspendedAt ?? null,
    canceledAt: current?.canceledAt ?? null,
    externalRef: request.externalRef ?? current?.externalRef ?? null,
  };
  const endsBeforeStart = (start: Date) =>
    new Refused({
      code: "validation_failed",
      detail: "The period ends before it starts.",
      fields: [
        {
          path: "periodEnd",
          message: request.periodStart
            ? "must be after periodStart"
            : `must be after now (${start.toISOString()})`,
        },
      ],
    });
  const newPeriod = (length: (start: Date) => Date | null) => {
    // the effective start (periodStart, else now) must come before the end, whether or not the
    // caller gave a start: an end in the past would be stored and moved to past_due at once
    const start = request.periodStart ?? now;
    if (request.periodEnd && request.periodEnd.getTime() <= start.getTime()) throw endsBeforeStart(start);
    next.currentPeriodStart = start;
    next.currentPeriodEnd = request.periodEnd ?? length(start);
  };
  if (
    request.periodEnd &&
    request.periodStart &&
    request.periodEnd.getTime() <= request.periodStart.getTime()
  )
    throw endsBeforeStart(request.periodStart);

  switch (to) {
    case "trialing":
      if (request.event === "start_trial")
        newPeriod((start) => new Date(start.getTime() + DEFAULT_TRIAL_DAYS * DAY_MS));
      else if (request.event === "change_plan" && !paid) {
        // moving a trial to a free plan ends the trial (documented beside the table)
        next.status = "active";
        newPeriod(() => null);
      }
      break;
    case "active":
      if (request.event === "change_plan") {
        if (!paid) newPeriod(() => null);
        else if (!next.currentPeriodEnd) newPeriod(addMonthUtc);
      } else newPeriod((start) => (paid ? addMonthUtc(start) : null));
      next.pastDueSince = null;
      next.suspendedAt = null;
      next.canceledAt = null;
      break;
    case "past_due":
      if (request.event === "change_plan" && !paid) {
        // a free plan has nothing left to pay: the subscription leaves the suspension path
        // (active, no period end, no grace running), as a trial moved to a free plan does
        next.status = "active";
        newPeriod(() => null);
        next.pastDueSince = null;
        next.suspendedAt = null;
        next.canceledAt = null;
      } else if (from !== "past_due") next.pastDueSince = now;
      break;
    case "suspended":
      next.suspendedAt = now;
      break;
    case "canceled":
      next.canceledAt = now;
      next.pastDueSince = null;
      break;
  }
  return { to: next.status, next };
}
