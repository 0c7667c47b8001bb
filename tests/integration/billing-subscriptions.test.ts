import { beforeAll, describe, expect, test } from "bun:test";
import { and, eq, sql } from "drizzle-orm";
import { applySubscriptionEvent } from "../../src/billing/apply-subscription-event.ts";
import { getTenantFeatures } from "../../src/billing/get-tenant-features.ts";
import { runSubscriptionBatch } from "../../src/billing/run-subscription-batch.ts";
import {
  DAY_MS,
  eventSources,
  nextState,
  type SubscriptionEvent,
  type SubscriptionState,
  subscriptionEvents,
  subscriptionStates,
} from "../../src/billing/subscription-states.ts";
import type { Cache } from "../../src/cache/port.ts";
import { tenantFeaturesKey } from "../../src/cache/read-through.ts";
import { invalidateScript } from "../../src/cache/scripts.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { backgroundJobs, subscriptionHistory, subscriptions } from "../../src/db/schema/index.ts";
import type { Deps } from "../../src/deps.ts";
import { AppError } from "../../src/errors.ts";
import { statusOf } from "../../src/http/problem-json.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant } from "../helpers/identity.ts";

const clock = new ManualClock("2026-11-10T12:00:00Z");
let deps: Deps;

const h = useTestApp({
  cache: "billing-subs",
  clock,
  settings: { "SaasSubscriptions:PastDueGraceDays": "7", "SaasSubscriptions:BatchSize": "3" },
});
const t = h.testDatabase;
const raw = h.redis;
const prefix = h.cachePrefix;
beforeAll(() => {
  deps = h.deps;
});

const db = () => t.database.db;

/** A tenant whose subscription is in `state`, with times that let the loop's guards pass. */
async function tenantIn(state: SubscriptionState): Promise<string> {
  const tenant = await createTenant(db());
  if (state === "none") return tenant.id;
  const now = clock.now();
  await db()
    .insert(subscriptions)
    .values({
      tenantId: tenant.id,
      planCode: "pro",
      status: state,
      currentPeriodStart: new Date(now.getTime() - 31 * DAY_MS),
      currentPeriodEnd: new Date(now.getTime() - DAY_MS),
      pastDueSince: state === "past_due" ? new Date(now.getTime() - 8 * DAY_MS) : null,
    });
  return tenant.id;
}

function sourceOf(event: SubscriptionEvent) {
  return eventSources.loop.includes(event) ? ("loop" as const) : ("admin" as const);
}

describe("transition table: every state × event", () => {
  for (const state of subscriptionStates) {
    for (const event of subscriptionEvents) {
      const expected = nextState(state, event);
      test(`${state} + ${event} → ${expected ?? "409"}`, async () => {
        const tenantId = await tenantIn(state);
        const input = {
          event,
          source: sourceOf(event),
          plan: event === "change_plan" ? "enterprise" : event === "start_trial" ? "pro" : undefined,
        };
        if (!expected) {
          const error = await applySubscriptionEvent(deps, systemCtx("test", tenantId), input).catch(
            (e: unknown) => e,
          );
          expect(error).toBeInstanceOf(AppError);
          expect(statusOf[(error as AppError).code]).toBe(409);
          const [row] = await db().select().from(subscriptions).where(eq(subscriptions.tenantId, tenantId));
          expect(row?.status ?? "none").toBe(state);
          return;
        }
        const result = await applySubscriptionEvent(deps, systemCtx("test", tenantId), input);
        expect(result.subscription.status).toBe(expected);
        const history = await db()
          .select()
          .from(subscriptionHistory)
          .where(eq(subscriptionHistory.tenantId, tenantId));
        expect(history).toHaveLength(1);
        expect(history[0]).toMatchObject({
          event,
          fromStatus: state === "none" ? null : state,
          toStatus: expected,
          source: input.source,
        });
        const jobs = await db()
          .select({ payload: backgroundJobs.payload })
          .from(backgroundJobs)
          .where(
            and(
              eq(backgroundJobs.kind, "billing.subscription_changed"),
              sql`${backgroundJobs.payload}->>'tenantId' = ${tenantId}`,
            ),
          );
        expect(jobs).toHaveLength(1);
        expect(jobs[0]?.payload).toMatchObject({ event, toStatus: expected, historyId: history[0]?.id });
      });
    }
  }
});

describe("transition effects", () => {
  test("a repeated payment failure keeps the grace that already runs", async () => {
    const tenantId = await tenantIn("active");
    const first = await applySubscriptionEvent(deps, systemCtx("test", tenantId), {
      event: "payment_failed",
      source: "admin",
    });
    const since = first.subscription.pastDueSince;
    clock.advance(DAY_MS);
    const second = await applySubscriptionEvent(deps, systemCtx("test", tenantId), {
      event: "payment_failed",
      source: "admin",
    });
    expect(second.subscription.status).toBe("past_due");
    expect(second.subscription.pastDueSince?.getTime()).toBe(since?.getTime());
  });

  test("payment after past due starts a new paid month and clears past_due_since", async () => {
    const tenantId = await tenantIn("past_due");
    const result = await applySubscriptionEvent(deps, systemCtx("test", tenantId), {
      event: "payment_succeeded",
      source: "webhook",
    });
    expect(result.subscription).toMatchObject({ status: "active", pastDueSince: null });
    expect(result.subscription.currentPeriodStart.getTime()).toBe(clock.now().getTime());
    expect(result.subscription.currentPeriodEnd?.getTime()).toBeGreaterThan(
      clock.now().getTime() + 27 * DAY_MS,
    );
  });

  test("the loop's events cannot come from an admin or a webhook, nor admin-only ones from a webhook", async () => {
    const tenantId = await tenantIn("past_due");
    for (const [event, source] of [
      ["grace_expired", "admin"],
      ["period_ended_unpaid", "webhook"],
      ["suspend", "webhook"],
    ] as const) {
      const error = await applySubscriptionEvent(deps, systemCtx("test", tenantId), { event, source }).catch(
        (e: unknown) => e,
      );
      expect(statusOf[(error as AppError).code]).toBe(400);
    }
  });

  test("concurrent deliveries of one provider event apply it once, even for a tenant without a subscription", async () => {
    const tenantId = await tenantIn("none");
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        applySubscriptionEvent(deps, systemCtx("test", tenantId), {
          event: "activate",
          source: "webhook",
          plan: "pro",
          externalEventId: "evt_same",
        }),
      ),
    );
    expect(results.filter((r) => r.changed)).toHaveLength(1);
    expect(results.every((r) => r.subscription.status === "active")).toBe(true);
    const history = await db()
      .select()
      .from(subscriptionHistory)
      .where(eq(subscriptionHistory.tenantId, tenantId));
    expect(history).toHaveLength(1);
  });

  test("a system plan (the suspended set) and unknown plans cannot be assigned", async () => {
    const tenantId = await tenantIn("active");
    for (const plan of ["suspended", "no-such-plan"]) {
      const error = await applySubscriptionEvent(deps, systemCtx("test", tenantId), {
        event: "change_plan",
        source: "admin",
        plan,
      }).catch((e: unknown) => e);
      expect((error as AppError).code).toBe("validation_failed");
    }
  });

  test("every change drops the tenant's cached features", async () => {
    const tenantId = await tenantIn("active");
    expect((await getTenantFeatures(deps, systemCtx("test", tenantId))).plan).toBe("pro");
    expect(await raw.client.exists(`${prefix}${tenantFeaturesKey(tenantId)}`)).toBe(1);
    await applySubscriptionEvent(deps, systemCtx("test", tenantId), { event: "suspend", source: "admin" });
    expect(await raw.client.exists(`${prefix}${tenantFeaturesKey(tenantId)}`)).toBe(0);
    const features = await getTenantFeatures(deps, systemCtx("test", tenantId));
    expect(features.plan).toBe("suspended");
    expect(features.features.api_calls?.enabled).toBe(false);
  });

  test("a features read that loaded before a suspension does not cache the old features after it", async () => {
    const tenantId = await tenantIn("active");
    const cache = deps.cache;
    if (!cache) throw new Error("these tests run with a cache");
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let writing = () => {};
    const aboutToWrite = new Promise<void>((resolve) => {
      writing = resolve;
    });
    // the reader's cache: any write-back (a plain set, or a script other than the invalidation)
    // waits until the suspension below has committed and invalidated
    const held: Cache = {
      ...cache,
      set: async (key, value, ttl) => {
        writing();
        await gate;
        return cache.set(key, value, ttl);
      },
      run: async (script, keys, args) => {
        if (script.name !== invalidateScript.name) {
          writing();
          await gate;
        }
        return cache.run(script, keys, args);
      },
    };
    const reader = getTenantFeatures({ ...deps, cache: held }, systemCtx("test", tenantId)); // misses, loads "pro"
    await aboutToWrite;
    await applySubscriptionEvent(deps, systemCtx("test", tenantId), { event: "suspend", source: "admin" });
    release();
    expect((await reader).plan).toBe("pro"); // what it loaded, before the suspension committed
    const after = await getTenantFeatures(deps, systemCtx("test", tenantId));
    expect(after.plan).toBe("suspended");
    expect(after.features.storage_bytes).toMatchObject({ enabled: true, limit: 0 });
  });
});

describe("subscription loop", () => {
  async function freshSubscription(periodEnd: Date): Promise<string> {
    const tenant = await createTenant(db());
    await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "activate",
      source: "admin",
      plan: "pro",
      periodStart: new Date(periodEnd.getTime() - 30 * DAY_MS),
      periodEnd,
    });
    return tenant.id;
  }

  async function statusOf(tenantId: string) {
    const [row] = await db().select().from(subscriptions).where(eq(subscriptions.tenantId, tenantId));
    return row;
  }

  async function drain() {
    const moved = [];
    for (;;) {
      const batch = await runSubscriptionBatch(deps, systemCtx("test"), { batchSize: 3 });
      moved.push(...batch.changed);
      if (!batch.more) return moved;
    }
  }

  test("grace ends at exactly PastDueGraceDays after past_due_since", async () => {
    await drain(); // whatever earlier tests left due
    const end = new Date(clock.now().getTime() + 1000);
    const tenantId = await freshSubscription(end);
    clock.set(end.getTime() - 1);
    await drain();
    expect((await statusOf(tenantId))?.status).toBe("active");

    clock.set(end);
    await drain();
    const pastDue = await statusOf(tenantId);
    expect(pastDue?.status).toBe("past_due");
    expect(pastDue?.pastDueSince?.getTime()).toBe(end.getTime());

    const graceEnd = end.getTime() + 7 * DAY_MS;
    clock.set(graceEnd - 1);
    await drain();
    expect((await statusOf(tenantId))?.status).toBe("past_due");
    expect((await getTenantFeatures(deps, systemCtx("test", tenantId))).features.api_calls?.enabled).toBe(
      true,
    );

    clock.set(graceEnd);
    await drain();
    const suspended = await statusOf(tenantId);
    expect(suspended?.status).toBe("suspended");
    expect(suspended?.suspendedAt?.getTime()).toBe(graceEnd);
    // the cached features were dropped: the next read sees the suspended set
    expect((await getTenantFeatures(deps, systemCtx("test", tenantId))).features.api_calls?.enabled).toBe(
      false,
    );
    const events = (
      await db().select().from(subscriptionHistory).where(eq(subscriptionHistory.tenantId, tenantId))
    ).map((h) => `${h.source}:${h.event}:${h.toStatus}`);
    expect(events).toEqual([
      "admin:activate:active",
      "loop:period_ended_unpaid:past_due",
      "loop:grace_expired:suspended",
    ]);
  });

  test("idempotent: a second tick changes nothing; batches go on until none is due", async () => {
    await drain();
    const end = new Date(clock.now().getTime() + 1000);
    const ids = await Promise.all(Array.from({ length: 7 }, () => freshSubscription(end)));
    clock.set(end.getTime() + 1);
    const first = await drain();
    expect(first.map((r) => r.subscription.tenantId).sort()).toEqual([...ids].sort());
    expect((await drain()).length).toBe(0);
    const history = await execute<{ n: number }>(
      db(),
      sql`select count(*)::int as n from subscription_history where event = 'period_ended_unpaid'
          and tenant_id in ${sql.raw(`(${ids.map((id) => `'${id}'`).join(",")})`)}`,
    );
    expect(history[0]?.n).toBe(7);
  });

  test("two loop instances at once move each subscription exactly once", async () => {
    await drain();
    const end = new Date(clock.now().getTime() + 1000);
    const ids = await Promise.all(Array.from({ length: 12 }, () => freshSubscription(end)));
    clock.set(end.getTime() + 1);
    const run = async () => {
      const moved: string[] = [];
      for (;;) {
        const batch = await runSubscriptionBatch(deps, systemCtx("test"), { batchSize: 3 });
        moved.push(...batch.changed.map((r) => r.subscription.tenantId));
        if (!batch.more) return moved;
      }
    };
    const [a, b] = await Promise.all([run(), run()]);
    const all = [...(a ?? []), ...(b ?? [])].sort();
    expect(all).toEqual([...ids].sort());
    expect(new Set(all).size).toBe(12);
    for (const id of ids) expect((await statusOf(id))?.status).toBe("past_due");
    const jobs = await execute<{ n: number }>(
      db(),
      sql`select count(*)::int as n from background_jobs where kind = 'billing.subscription_changed'
          and payload->>'event' = 'period_ended_unpaid'
          and payload->>'tenantId' in ${sql.raw(`(${ids.map((id) => `'${id}'`).join(",")})`)}`,
    );
    expect(jobs[0]?.n).toBe(12);
  });

  test("a free subscription has no period end and is never made past due", async () => {
    const tenant = await createTenant(db());
    const result = await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "activate",
      source: "admin",
      plan: "free",
    });
    expect(result.subscription.currentPeriodEnd).toBeNull();
    clock.advance(400 * DAY_MS);
    await drain();
    expect((await statusOf(tenant.id))?.status).toBe("active");
  });
});

describe("downgrade while past due", () => {
  test("change_plan to the free plan from past_due: active, no period end, grace cleared, never suspended", async () => {
    const tenant = await createTenant(db());
    await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "activate",
      source: "admin",
      plan: "pro",
    });
    await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "payment_failed",
      source: "admin",
    });
    clock.advance(3 * DAY_MS);
    const free = await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "change_plan",
      source: "webhook",
      plan: "free",
    });
    expect(free.to).toBe("active");
    expect(free.subscription).toMatchObject({
      status: "active",
      planCode: "free",
      currentPeriodEnd: null,
      pastDueSince: null,
      suspendedAt: null,
    });
    expect(free.subscription.currentPeriodStart.getTime()).toBe(clock.now().getTime());
    const [history] = await db()
      .select()
      .from(subscriptionHistory)
      .where(and(eq(subscriptionHistory.tenantId, tenant.id), eq(subscriptionHistory.event, "change_plan")));
    expect(history).toMatchObject({ fromStatus: "past_due", toStatus: "active", toPlan: "free" });
    // well past the grace (and any paid period end): the loop leaves it alone
    clock.advance(60 * DAY_MS);
    for (;;) if (!(await runSubscriptionBatch(deps, systemCtx("test"), { batchSize: 3 })).more) break;
    const [row] = await db().select().from(subscriptions).where(eq(subscriptions.tenantId, tenant.id));
    expect(row).toMatchObject({ status: "active", planCode: "free", pastDueSince: null });
    expect((await getTenantFeatures(deps, systemCtx("test", tenant.id))).plan).toBe("free");
  });

  test("change_plan to another paid plan from past_due keeps the grace running", async () => {
    const tenantId = await tenantIn("past_due");
    const [before] = await db().select().from(subscriptions).where(eq(subscriptions.tenantId, tenantId));
    const result = await applySubscriptionEvent(deps, systemCtx("test", tenantId), {
      event: "change_plan",
      source: "admin",
      plan: "enterprise",
    });
    expect(result.subscription.status).toBe("past_due");
    expect(result.subscription.pastDueSince?.getTime()).toBe(before?.pastDueSince?.getTime());
  });
});

describe("period validation", () => {
  test("a period end at or before the effective start (periodStart, else now) is refused, nothing stored", async () => {
    const tenant = await createTenant(db());
    const past = new Date(clock.now().getTime() - DAY_MS);
    for (const input of [
      { periodEnd: past },
      { periodEnd: clock.now() },
      {
        periodStart: new Date(clock.now().getTime() + 2 * DAY_MS),
        periodEnd: new Date(clock.now().getTime() + DAY_MS),
      },
    ]) {
      const error = await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
        event: "activate",
        source: "admin",
        plan: "pro",
        ...input,
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe("validation_failed");
      expect(statusOf[(error as AppError).code]).toBe(400);
      expect((error as AppError).fields?.[0]?.path).toBe("periodEnd");
    }
    const rows = await db().select().from(subscriptions).where(eq(subscriptions.tenantId, tenant.id));
    expect(rows).toHaveLength(0);
    // a start in the past with an end in the future is fine
    const ok = await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "activate",
      source: "admin",
      plan: "pro",
      periodStart: new Date(clock.now().getTime() - 2 * DAY_MS),
      periodEnd: new Date(clock.now().getTime() + DAY_MS),
    });
    expect(ok.subscription.status).toBe("active");
  });

  test("a payment with an end in the past does not renew a past-due subscription", async () => {
    const tenantId = await tenantIn("past_due");
    const error = await applySubscriptionEvent(deps, systemCtx("test", tenantId), {
      event: "payment_succeeded",
      source: "webhook",
      periodEnd: new Date(clock.now().getTime() - 1),
    }).catch((e: unknown) => e);
    expect((error as AppError).code).toBe("validation_failed");
    const [row] = await db().select().from(subscriptions).where(eq(subscriptions.tenantId, tenantId));
    expect(row?.status).toBe("past_due");
  });
});

describe("trials", () => {
  test("a trial needs a paid plan; moving a trial to the free plan ends it", async () => {
    const tenant = await createTenant(t.database.db);
    const refused = await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "start_trial",
      source: "admin",
      plan: "free",
    }).catch((e: unknown) => e);
    expect((refused as AppError).code).toBe("validation_failed");
    const trial = await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "start_trial",
      source: "admin",
      plan: "pro",
    });
    expect(trial.subscription.status).toBe("trialing");
    expect(trial.subscription.currentPeriodEnd?.getTime()).toBe(clock.now().getTime() + 14 * DAY_MS);
    const free = await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "change_plan",
      source: "admin",
      plan: "free",
    });
    expect(free.subscription).toMatchObject({ status: "active", planCode: "free", currentPeriodEnd: null });
  });
});
