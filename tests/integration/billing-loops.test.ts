import { afterAll, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { applySubscriptionEvent } from "../../src/billing/apply-subscription-event.ts";
import { billingJobs } from "../../src/billing/notifications.ts";
import { DAY_MS } from "../../src/billing/subscription-states.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { backgroundJobs, subscriptions } from "../../src/db/schema/index.ts";
import { createJobRegistry } from "../../src/jobs/registry.ts";
import { startBackground } from "../../src/loops/background.ts";
import { subscriptionsLoop } from "../../src/loops/subscriptions-loop.ts";
import { usageReconciliationLoop } from "../../src/loops/usage-reconciliation-loop.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { periodAt, usageCounterKey } from "../../src/usage/counters.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { recordUsage } from "../../src/usage/record-usage.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";
import { createTenant } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";

const raw = rawRedis();
const prefix = uniquePrefix("billing-loops");
const clock = new ManualClock("2026-11-10T12:00:00Z");

afterAll(async () => {
  await raw.cleanup(prefix);
  raw.close();
}, 30_000);
const t = useTestDatabase();

const loops = {
  subscriptions: subscriptionsLoop({ intervalMs: 20 }),
  usageReconciliation: usageReconciliationLoop({ intervalMs: 20 }),
};

test("startBackground runs both loops on the shared runner: a due subscription moves, a drifted counter is fixed", async () => {
  const deps = await testDeps(
    testConfig({ cacheUrl: REDIS_URL, settings: { "BackgroundProcessing:JobsEnabled": "false" } }),
    { database: t.database, clock, cachePrefix: prefix },
  );
  const tenant = await createTenant(t.database.db);
  await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
    event: "activate",
    source: "admin",
    plan: "pro",
    periodStart: new Date(clock.now().getTime() - 30 * DAY_MS),
    periodEnd: new Date(clock.now().getTime() - 1),
  });
  await getCurrentUsage(deps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" });
  await recordUsage(deps, systemCtx("test", tenant.id), {
    feature: "api_calls",
    quantity: 9,
    idempotencyKey: "k",
  });
  const key = `${prefix}${usageCounterKey(tenant.id, "api_calls", periodAt("month", clock.now()))}`;
  await raw.client.set(key, "1");

  const background = await startBackground(deps, { loops });
  try {
    expect(background.loops.map((l) => l.name).sort()).toEqual(["subscriptions", "usageReconciliation"]);
    await waitFor(
      async () => {
        const [row] = await t.database.db
          .select()
          .from(subscriptions)
          .where(eq(subscriptions.tenantId, tenant.id));
        return row?.status === "past_due";
      },
      { what: "the subscription loop" },
    );
    await waitFor(async () => (await raw.client.get(key)) === "9", { what: "the reconciliation loop" });
  } finally {
    await background.stop(1_000);
    await deps.cache?.close();
  }
});

test("each loop's own flag and the master switch turn it off", async () => {
  for (const [settings, expected] of [
    [{ "SaasSubscriptions:Enabled": "false" }, ["usageReconciliation"]],
    [{ "FeatureUsageReconciliation:Enabled": "false" }, ["subscriptions"]],
    [{ "BackgroundProcessing:Enabled": "false" }, []],
  ] as const) {
    const deps = await testDeps(
      testConfig({ cacheUrl: null, settings: { "BackgroundProcessing:JobsEnabled": "false", ...settings } }),
      { database: t.database, clock },
    );
    const background = await startBackground(deps, { loops });
    expect(background.loops.map((l) => l.name)).toEqual([...expected]);
    await background.stop(1_000);
  }
});

test("the job loop runs billing.subscription_changed with the registry the server uses", async () => {
  const logs: string[] = [];
  const deps = await testDeps(testConfig({ cacheUrl: null, settings: { "Logging:Level": "info" } }), {
    database: t.database,
    clock: new ManualClock(),
  });
  const logger = createLogger({ level: "info", redactor: deps.redactor, write: (line) => logs.push(line) });
  const tenant = await createTenant(t.database.db);
  await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
    event: "start_trial",
    source: "admin",
    plan: "pro",
  });
  const background = await startBackground(deps, {
    registry: createJobRegistry().add({ logger }, billingJobs),
  });
  try {
    await waitFor(
      async () => {
        const rows = await t.database.db
          .select({ status: backgroundJobs.status })
          .from(backgroundJobs)
          .where(
            sql`${backgroundJobs.kind} = 'billing.subscription_changed' and ${backgroundJobs.payload}->>'tenantId' = ${tenant.id}`,
          );
        return rows[0]?.status === "succeeded";
      },
      { what: "the notification job" },
    );
    expect(logs.some((l) => l.includes("subscription changed") && l.includes(tenant.id))).toBe(true);
  } finally {
    await background.stop(1_000);
  }
});
