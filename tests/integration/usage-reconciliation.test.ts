import { beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { applySubscriptionEvent } from "../../src/billing/apply-subscription-event.ts";
import { assertFeature } from "../../src/billing/entitlements.ts";
import { tenantFeaturesKey } from "../../src/cache/read-through.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { usageCounters, usageEvents, usageReconciliations } from "../../src/db/schema/index.ts";
import type { Deps } from "../../src/deps.ts";
import type { AppError } from "../../src/errors.ts";
import { lockCounter, periodAt, usageCounterKey } from "../../src/usage/counters.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { reconcileUsage, reconcileUsageBatch } from "../../src/usage/reconcile.ts";
import { recordUsage } from "../../src/usage/record-usage.ts";
import { testConfig, testDeps, useTestApp } from "../helpers/app.ts";
import { createTenant } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";

const clock = new ManualClock("2026-11-10T12:00:00Z");
const INTERVAL_MS = 60 * 60_000;
let deps: Deps;
let devDeps: Deps;

const h = useTestApp({ cache: "usage", clock, poolSize: 12 });
const t = h.testDatabase;
const raw = h.redis;
const prefix = h.cachePrefix;
beforeAll(async () => {
  deps = h.deps;
  // the same database without a cache
  devDeps = await testDeps(testConfig({ cacheUrl: null }), { database: t.database, clock });
}, 30_000);

const db = () => t.database.db;
const monthKey = (tenantId: string, feature = "api_calls") =>
  `${prefix}${usageCounterKey(tenantId, feature, periodAt(feature === "api_calls" ? "month" : "never", clock.now()))}`;

async function ledger(tenantId: string, feature = "api_calls"): Promise<number> {
  const rows = await db().select().from(usageEvents).where(eq(usageEvents.tenantId, tenantId));
  return rows.filter((r) => r.featureKey === feature).reduce((sum, r) => sum + r.quantity, 0);
}

/** What "the cache was flushed" means for one tenant: its keys are gone (never FLUSHALL a shared Redis). */
async function flushTenant(tenantId: string) {
  const keys = await raw.keys(`${prefix}usage:${tenantId}:`);
  const features = await raw.keys(`${prefix}${tenantFeaturesKey(tenantId)}`);
  // one DEL per key: on a Redis Cluster (the scaled topology) the keys may sit in different slots
  for (const key of [...keys, ...features]) await raw.client.del(key);
}

describe("recording", () => {
  test("concurrent recording keeps the ledger and the counter exact; duplicate keys count once", async () => {
    const tenant = await createTenant(db());
    await getCurrentUsage(deps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" }); // builds the (empty) counter
    // every fourth call repeats the previous one's key and quantity: a retried request
    const keyOf = (i: number) => (i % 4 === 3 ? i - 1 : i);
    const calls = Array.from({ length: 200 }, (_, i) =>
      recordUsage(deps, systemCtx("test", tenant.id), {
        feature: "api_calls",
        quantity: (keyOf(i) % 3) + 1,
        idempotencyKey: `req-${keyOf(i)}`,
      }),
    );
    const results = await Promise.all(calls);
    const recorded = results.filter((r) => r.recorded).length;
    expect(recorded).toBe(150);
    const expected = Array.from({ length: 200 }, (_, i) => i)
      .filter((i) => i % 4 !== 3)
      .reduce((sum, i) => sum + (i % 3) + 1, 0);
    expect(await ledger(tenant.id)).toBe(expected);
    expect(Number(await raw.client.get(monthKey(tenant.id)))).toBe(expected);
    expect(
      await getCurrentUsage(deps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" }),
    ).toBe(expected);

    const again = await recordUsage(deps, systemCtx("test", tenant.id), {
      feature: "api_calls",
      quantity: 50,
      idempotencyKey: "req-0",
    });
    expect(again.recorded).toBe(false);
    expect(await ledger(tenant.id)).toBe(expected);
  });

  test("a missing counter is rebuilt from the ledger, not started at zero, even while events arrive", async () => {
    const tenant = await createTenant(db());
    for (let i = 0; i < 10; i++)
      await recordUsage(deps, systemCtx("test", tenant.id), {
        feature: "api_calls",
        quantity: 2,
        idempotencyKey: `a${i}`,
      });
    expect(await raw.client.exists(monthKey(tenant.id))).toBe(0);
    const [usage] = await Promise.all([
      getCurrentUsage(deps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" }),
      ...Array.from({ length: 20 }, (_, i) =>
        recordUsage(deps, systemCtx("test", tenant.id), {
          feature: "api_calls",
          quantity: 1,
          idempotencyKey: `b${i}`,
        }),
      ),
    ]);
    expect(usage).toBeGreaterThanOrEqual(20);
    expect(Number(await raw.client.get(monthKey(tenant.id)))).toBe(40);
    expect(await ledger(tenant.id)).toBe(40);
  });

  test("validation: unknown or boolean features, zero or negative monthly quantities", async () => {
    const tenant = await createTenant(db());
    for (const input of [
      { feature: "no_such", quantity: 1 },
      { feature: "sso", quantity: 1 },
      { feature: "api_calls", quantity: 0 },
      { feature: "api_calls", quantity: -1 },
      { feature: "api_calls", quantity: 1.5 },
    ]) {
      const error = await recordUsage(deps, systemCtx("test", tenant.id), {
        idempotencyKey: "x",
        ...input,
      }).catch((e: unknown) => e);
      expect((error as AppError).code).toBe("validation_failed");
    }
    // storage never resets and takes deltas both ways
    await recordUsage(deps, systemCtx("test", tenant.id), {
      feature: "storage_bytes",
      quantity: 500,
      idempotencyKey: "up",
    });
    await recordUsage(deps, systemCtx("test", tenant.id), {
      feature: "storage_bytes",
      quantity: -200,
      idempotencyKey: "rm",
    });
    expect(
      await getCurrentUsage(deps, systemCtx("test", tenant.id), {
        feature: "storage_bytes",
        period: "never",
      }),
    ).toBe(300);
  });

  test("without a cache (Development) limits read the ledger", async () => {
    const tenant = await createTenant(db());
    await recordUsage(devDeps, systemCtx("test", tenant.id), {
      feature: "api_calls",
      quantity: 7,
      idempotencyKey: "d1",
    });
    await recordUsage(devDeps, systemCtx("test", tenant.id), {
      feature: "api_calls",
      quantity: 7,
      idempotencyKey: "d1",
    });
    expect(
      await getCurrentUsage(devDeps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" }),
    ).toBe(7);
  });
});

describe("cache outage", () => {
  test("recording still lands in the ledger and limits read the ledger; reconciliation fixes the counter later", async () => {
    const down = await testDeps(testConfig({ cacheUrl: "redis://127.0.0.1:1" }), {
      database: t.database,
      clock,
      cachePrefix: prefix,
      waitForCache: false,
    });
    try {
      const tenant = await createTenant(db());
      await getCurrentUsage(deps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" }); // counter built (0) while the cache was up
      const result = await recordUsage(down, systemCtx("test", tenant.id), {
        feature: "api_calls",
        quantity: 4,
        idempotencyKey: "outage",
      });
      expect(result).toMatchObject({ recorded: true, counter: null });
      expect(
        await getCurrentUsage(down, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" }),
      ).toBe(4);
      expect(Number(await raw.client.get(monthKey(tenant.id)))).toBe(0); // the increment was lost
      clock.advance(INTERVAL_MS);
      const pass = await reconcileUsage(deps, systemCtx("test"), { batchSize: 100, intervalMs: INTERVAL_MS });
      expect(pass.corrections.find((c) => c.tenantId === tenant.id)).toMatchObject({
        cachedBefore: 0,
        ledgerTotal: 4,
      });
    } finally {
      await down.cache?.close();
    }
  });
});

describe("reconciliation", () => {
  async function tenantWithUsage(quantity: number) {
    const tenant = await createTenant(db());
    await getCurrentUsage(deps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" });
    await recordUsage(deps, systemCtx("test", tenant.id), {
      feature: "api_calls",
      quantity,
      idempotencyKey: "seed",
    });
    return tenant.id;
  }

  test("one pass corrects drift injected into the cache (lost and double-counted increments) and records it", async () => {
    await reconcileUsage(deps, systemCtx("test"), { batchSize: 50, intervalMs: INTERVAL_MS }); // earlier tests' counters
    const lost = await tenantWithUsage(100);
    const doubled = await tenantWithUsage(100);
    const exact = await tenantWithUsage(100);
    await raw.client.set(monthKey(lost), "60"); // increments lost (a crash between ledger and cache)
    await raw.client.incrby(monthKey(doubled), 100); // an increment applied twice

    const pass = await reconcileUsage(deps, systemCtx("test"), { batchSize: 2, intervalMs: INTERVAL_MS });
    const mine = pass.corrections.filter((c) => [lost, doubled, exact].includes(c.tenantId));
    expect(mine.map((c) => [c.tenantId, c.cachedBefore, c.ledgerTotal, c.reason]).sort()).toEqual(
      [
        [lost, 60, 100, "drift"],
        [doubled, 200, 100, "drift"],
      ].sort(),
    );
    for (const id of [lost, doubled, exact]) expect(Number(await raw.client.get(monthKey(id)))).toBe(100);
    const records = await db()
      .select()
      .from(usageReconciliations)
      .where(eq(usageReconciliations.tenantId, doubled));
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ ledgerTotal: 100, cachedBefore: 200, drift: 100, reason: "drift" });

    // nothing is due again before half the interval; a second pass then finds nothing to correct
    expect(
      (await reconcileUsage(deps, systemCtx("test"), { batchSize: 50, intervalMs: INTERVAL_MS })).claimed,
    ).toBe(0);
    clock.advance(INTERVAL_MS);
    const second = await reconcileUsage(deps, systemCtx("test"), { batchSize: 50, intervalMs: INTERVAL_MS });
    expect(second.claimed).toBeGreaterThanOrEqual(3);
    expect(second.corrections).toHaveLength(0);
    const [row] = await db().select().from(usageCounters).where(eq(usageCounters.tenantId, lost));
    expect(row).toMatchObject({ ledgerTotal: 100, lockedBy: null });
  });

  test("after a cache flush, limits still hold once reconciled (and on the next read before that)", async () => {
    const tenant = await createTenant(db());
    await applySubscriptionEvent(deps, systemCtx("test", tenant.id), {
      event: "activate",
      source: "admin",
      plan: "free",
    });
    await recordUsage(deps, systemCtx("test", tenant.id), {
      feature: "api_calls",
      quantity: 10_000,
      idempotencyKey: "all",
    });
    const blocked = await assertFeature(deps, systemCtx("test", tenant.id), { feature: "api_calls" }).catch(
      (e: unknown) => e,
    );
    expect((blocked as AppError).code).toBe("usage_limit_reached");

    await flushTenant(tenant.id);
    clock.advance(INTERVAL_MS);
    const pass = await reconcileUsage(deps, systemCtx("test"), { batchSize: 50, intervalMs: INTERVAL_MS });
    expect(pass.corrections.find((c) => c.tenantId === tenant.id)).toMatchObject({
      cachedBefore: null,
      ledgerTotal: 10_000,
      reason: "missing",
    });
    expect(Number(await raw.client.get(monthKey(tenant.id)))).toBe(10_000);
    const still = await assertFeature(deps, systemCtx("test", tenant.id), { feature: "api_calls" }).catch(
      (e: unknown) => e,
    );
    expect((still as AppError).code).toBe("usage_limit_reached");

    await flushTenant(tenant.id); // flushed again: the read path rebuilds before any reconciliation
    const rebuilt = await assertFeature(deps, systemCtx("test", tenant.id), { feature: "api_calls" }).catch(
      (e: unknown) => e,
    );
    expect((rebuilt as AppError).code).toBe("usage_limit_reached");
  });

  test("two reconcilers at once share the counters, each reconciled once", async () => {
    const ids = await Promise.all(Array.from({ length: 9 }, (_, i) => tenantWithUsage(i + 1)));
    for (const id of ids) await raw.client.set(monthKey(id), "0");
    clock.advance(INTERVAL_MS);
    const run = (workerId: string) =>
      reconcileUsage(deps, systemCtx("test"), { batchSize: 2, intervalMs: INTERVAL_MS, workerId });
    const [a, b] = await Promise.all([run("a"), run("b")]);
    const fixed = [...a.corrections, ...b.corrections].filter((c) => ids.includes(c.tenantId));
    expect(fixed).toHaveLength(9);
    expect(new Set(fixed.map((c) => c.tenantId)).size).toBe(9);
    for (const [i, id] of ids.entries()) expect(Number(await raw.client.get(monthKey(id)))).toBe(i + 1);
  });

  test("a pass whose counter was taken over while it waited records no correction", async () => {
    const tenant = await tenantWithUsage(7);
    clock.advance(INTERVAL_MS);
    await raw.client.set(monthKey(tenant), "2");
    const window = periodAt("month", clock.now());
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding = () => {};
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    // another transaction holds the counter's lock, as a recorder or a second reconciler would
    const holder = db().transaction(async (tx) => {
      await lockCounter(tx, tenant, "api_calls", window, "exclusive");
      holding();
      await released;
      // meanwhile the lease ran out and another reconciler took the counter
      await tx.update(usageCounters).set({ lockedBy: "thief" }).where(eq(usageCounters.tenantId, tenant));
    });
    await held;
    const pass = reconcileUsageBatch(deps, systemCtx("test"), {
      batchSize: 100,
      intervalMs: INTERVAL_MS,
      workerId: "slow",
    });
    await waitFor(async () => {
      const [row] = await db().select().from(usageCounters).where(eq(usageCounters.tenantId, tenant));
      return row?.lockedBy === "slow";
    });
    release();
    await holder;
    const result = await pass;
    expect(result.corrections.find((c) => c.tenantId === tenant)).toBeUndefined();
    const records = await db()
      .select()
      .from(usageReconciliations)
      .where(eq(usageReconciliations.tenantId, tenant));
    expect(records).toHaveLength(0);
    await db()
      .update(usageCounters)
      .set({ lockedBy: null, lockedUntil: null })
      .where(eq(usageCounters.tenantId, tenant));
  });

  test("a counter claimed by a reconciler that died is taken over once its lease ends", async () => {
    const tenant = await tenantWithUsage(5);
    clock.advance(INTERVAL_MS);
    await db()
      .update(usageCounters)
      .set({ lockedBy: "dead", lockedUntil: new Date(clock.now().getTime() + 60_000) })
      .where(eq(usageCounters.tenantId, tenant));
    await raw.client.set(monthKey(tenant), "1");
    const during = await reconcileUsageBatch(deps, systemCtx("test"), {
      batchSize: 100,
      intervalMs: INTERVAL_MS,
    });
    expect(during.corrections.find((c) => c.tenantId === tenant)).toBeUndefined();
    clock.advance(60_001);
    const after = await reconcileUsage(deps, systemCtx("test"), { batchSize: 100, intervalMs: INTERVAL_MS });
    expect(after.corrections.find((c) => c.tenantId === tenant)).toMatchObject({
      cachedBefore: 1,
      ledgerTotal: 5,
    });
  });
});
