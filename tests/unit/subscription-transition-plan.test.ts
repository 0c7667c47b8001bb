import { describe, expect, test } from "bun:test";
import {
  DAY_MS,
  eventSources,
  nextState,
  type SubscriptionEvent,
  type SubscriptionState,
  subscriptionEvents,
  subscriptionStates,
} from "../../src/billing/subscription-states.ts";
import {
  type PlanInfo,
  planTransition,
  refuseSource,
  type SubscriptionFields,
  type TransitionRequest,
  targetPlanCode,
} from "../../src/billing/transition-plan.ts";

const now = new Date("2026-11-10T12:00:00Z");
const ago = (days: number) => new Date(now.getTime() - days * DAY_MS);
const catalog: Record<string, PlanInfo> = {
  free: { code: "free", priceCents: 0, system: false },
  pro: { code: "pro", priceCents: 4900, system: false },
  enterprise: { code: "enterprise", priceCents: 49900, system: false },
  suspended: { code: "suspended", priceCents: 0, system: true },
};

/** A row in `state` whose times let the loop's guards pass (as the integration test sets it up). */
function row(
  state: SubscriptionState,
  overrides: Partial<SubscriptionFields> = {},
): SubscriptionFields | null {
  if (state === "none") return null;
  return {
    planCode: "pro",
    status: state,
    currentPeriodStart: ago(31),
    currentPeriodEnd: ago(1),
    pastDueSince: state === "past_due" ? ago(8) : null,
    suspendedAt: null,
    canceledAt: null,
    externalRef: null,
    ...overrides,
  };
}

function plan(current: SubscriptionFields | null, request: TransitionRequest, graceDays = 7) {
  const code = targetPlanCode(current, request, "free");
  return planTransition({
    current,
    request,
    defaultPlan: "free",
    plan: code ? catalog[code] : undefined,
    now,
    graceDays,
  });
}

const sourceOf = (event: SubscriptionEvent) => (eventSources.loop.includes(event) ? "loop" : "admin");

describe("planTransition: every state × event of the table", () => {
  for (const state of subscriptionStates) {
    for (const event of subscriptionEvents) {
      const expected = nextState(state, event);
      test(`${state} + ${event} → ${expected ?? "conflict"}`, () => {
        const result = plan(row(state), {
          event,
          source: sourceOf(event),
          plan: event === "change_plan" ? "enterprise" : event === "start_trial" ? "pro" : undefined,
        });
        if (!expected) {
          expect(result).toEqual({
            ok: false,
            refusal: {
              code: "conflict",
              detail: `A subscription in state "${state}" does not accept the event "${event}".`,
            },
          });
          return;
        }
        expect(result.ok).toBe(true);
        if (result.ok) {
          expect(result.from).toBe(state);
          expect(result.to).toBe(expected);
          expect(result.next.status).toBe(expected);
        }
      });
    }
  }
});

describe("planTransition: effects", () => {
  test("activate on a paid plan starts a month; on free the period never ends", () => {
    const paid = plan(null, { event: "activate", source: "admin", plan: "pro" });
    expect(paid).toMatchObject({
      ok: true,
      next: { planCode: "pro", currentPeriodStart: now, currentPeriodEnd: new Date("2026-12-10T12:00:00Z") },
    });
    const free = plan(null, { event: "activate", source: "admin" });
    expect(free).toMatchObject({ ok: true, next: { planCode: "free", currentPeriodEnd: null } });
  });

  test("start_trial runs 14 days and needs a paid plan", () => {
    expect(plan(null, { event: "start_trial", source: "admin", plan: "pro" })).toMatchObject({
      ok: true,
      to: "trialing",
      next: { currentPeriodEnd: new Date(now.getTime() + 14 * DAY_MS) },
    });
    expect(plan(null, { event: "start_trial", source: "admin", plan: "free" })).toEqual({
      ok: false,
      refusal: {
        code: "validation_failed",
        detail: "A trial needs a paid plan.",
        fields: [{ path: "plan", message: '"free" is free' }],
      },
    });
  });

  test("entering past_due sets past_due_since; failing again keeps it", () => {
    expect(plan(row("active"), { event: "payment_failed", source: "admin" })).toMatchObject({
      ok: true,
      next: { status: "past_due", pastDueSince: now },
    });
    const since = ago(3);
    expect(
      plan(row("past_due", { pastDueSince: since }), { event: "payment_failed", source: "admin" }),
    ).toMatchObject({ ok: true, next: { pastDueSince: since } });
  });

  test("change_plan to free ends a trial and leaves past_due: active, no period end, no grace", () => {
    for (const state of ["trialing", "past_due"] as const) {
      expect(plan(row(state), { event: "change_plan", source: "admin", plan: "free" })).toMatchObject({
        ok: true,
        to: "active",
        next: { status: "active", planCode: "free", currentPeriodEnd: null, pastDueSince: null },
      });
    }
  });

  test("change_plan from free to paid starts a month from now; to paid keeps the period", () => {
    const free = row("active", { planCode: "free", currentPeriodEnd: null });
    expect(plan(free, { event: "change_plan", source: "admin", plan: "pro" })).toMatchObject({
      ok: true,
      next: { currentPeriodStart: now, currentPeriodEnd: new Date("2026-12-10T12:00:00Z") },
    });
    const paid = row("active");
    expect(plan(paid, { event: "change_plan", source: "admin", plan: "enterprise" })).toMatchObject({
      ok: true,
      next: { currentPeriodStart: ago(31), currentPeriodEnd: ago(1) },
    });
  });

  test("suspend stamps suspended_at; cancel stamps canceled_at and clears past_due_since", () => {
    expect(plan(row("active"), { event: "suspend", source: "admin" })).toMatchObject({
      ok: true,
      next: { suspendedAt: now },
    });
    expect(plan(row("past_due"), { event: "cancel", source: "admin" })).toMatchObject({
      ok: true,
      next: { canceledAt: now, pastDueSince: null },
    });
  });

  test("a provider's period and subscription ref are taken as given", () => {
    const periodStart = new Date("2026-11-01T00:00:00Z");
    const periodEnd = new Date("2026-12-01T00:00:00Z");
    expect(
      plan(row("active"), {
        event: "payment_succeeded",
        source: "webhook",
        periodStart,
        periodEnd,
        externalRef: "sub_1",
      }),
    ).toMatchObject({
      ok: true,
      next: { currentPeriodStart: periodStart, currentPeriodEnd: periodEnd, externalRef: "sub_1" },
    });
  });
});

describe("planTransition: refusals", () => {
  test("the loop's events hold only once time ran out", () => {
    expect(
      plan(row("active", { currentPeriodEnd: new Date(now.getTime() + DAY_MS) }), {
        event: "period_ended_unpaid",
        source: "loop",
      }),
    ).toEqual({ ok: false, refusal: { code: "conflict", detail: "The current period has not ended." } });
    expect(
      plan(row("past_due", { pastDueSince: ago(6) }), { event: "grace_expired", source: "loop" }),
    ).toEqual({
      ok: false,
      refusal: { code: "conflict", detail: "The past-due grace period has not run out." },
    });
    // exactly graceDays × 24 h after past_due_since: due
    expect(
      plan(row("past_due", { pastDueSince: ago(7) }), { event: "grace_expired", source: "loop" }).ok,
    ).toBe(true);
  });

  test("change_plan without a plan, an unknown plan or a system plan: validation_failed on plan", () => {
    expect(plan(row("active"), { event: "change_plan", source: "admin" })).toEqual({
      ok: false,
      refusal: {
        code: "validation_failed",
        detail: "A plan is required.",
        fields: [{ path: "plan", message: "required for change_plan" }],
      },
    });
    for (const code of ["nope", "suspended"])
      expect(plan(row("active"), { event: "change_plan", source: "admin", plan: code })).toEqual({
        ok: false,
        refusal: {
          code: "validation_failed",
          detail: "No such plan.",
          fields: [{ path: "plan", message: `unknown plan "${code}"` }],
        },
      });
  });

  test("a conflict is reported before a bad plan", () => {
    expect(plan(row("canceled"), { event: "change_plan", source: "admin", plan: "nope" })).toMatchObject({
      ok: false,
      refusal: { code: "conflict" },
    });
  });

  test("a period end before its start, given or now: validation_failed on periodEnd", () => {
    expect(
      plan(null, {
        event: "activate",
        source: "webhook",
        plan: "pro",
        periodStart: new Date("2026-11-05T00:00:00Z"),
        periodEnd: new Date("2026-11-04T00:00:00Z"),
      }),
    ).toEqual({
      ok: false,
      refusal: {
        code: "validation_failed",
        detail: "The period ends before it starts.",
        fields: [{ path: "periodEnd", message: "must be after periodStart" }],
      },
    });
    expect(plan(null, { event: "activate", source: "webhook", plan: "pro", periodEnd: ago(1) })).toEqual({
      ok: false,
      refusal: {
        code: "validation_failed",
        detail: "The period ends before it starts.",
        fields: [{ path: "periodEnd", message: `must be after now (${now.toISOString()})` }],
      },
    });
  });

  test("refuseSource: who may send which event", () => {
    expect(refuseSource({ event: "grace_expired", source: "admin" })).toEqual({
      code: "bad_request",
      detail: 'The event "grace_expired" cannot come from admin.',
    });
    expect(refuseSource({ event: "suspend", source: "webhook" })?.code).toBe("bad_request");
    expect(refuseSource({ event: "cancel", source: "webhook" })).toBeNull();
  });
});
