import { afterAll, beforeAll, expect, test } from "bun:test";
import { createCache } from "../../src/cache/index.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import type { Deps } from "../../src/deps.ts";
import { periodAt, usageCounterKey } from "../../src/usage/counters.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { reconcileUsage } from "../../src/usage/reconcile.ts";
import { recordUsage } from "../../src/usage/record-usage.ts";
import { startUpstashBridge, type UpstashBridge } from "../fixtures/upstash-bridge.ts";
import { useTestApp } from "../helpers/app.ts";
import { rawRedis, SINGLE_REDIS_URL, silentLogger } from "../helpers/cache.ts";
import { createTenant } from "../helpers/identity.ts";

const clock = new ManualClock("2026-11-10T12:00:00Z");
let bridge: UpstashBridge;
let deps: Deps;

afterAll(async () => {
  await deps.cache?.close();
  await bridge.stop();
  await raw.cleanup(prefix);
  raw.close();
}, 30_000);
// the app's own deps have no cache; this file's deps reach Redis through the Upstash bridge
const h = useTestApp({ clock });
const t = h.testDatabase;
// the keys as the bridge stores them: on its single Redis node (Upstash is one node too), not on the
// topology's Redis (h.redis is the Redis Cluster when PLINTH_TEST_TOPOLOGY=scaled)
const raw = rawRedis(SINGLE_REDIS_URL);
const prefix = h.cachePrefix;
beforeAll(async () => {
  bridge = await startUpstashBridge();
  const base = h.deps;
  deps = {
    ...base,
    cache: createCache(bridge.url, {
      environment: "Development",
      logger: silentLogger,
      prefix,
      token: bridge.token,
    }),
  };
}, 30_000);

test("counters work the same over Upstash REST: increment only an existing counter, rebuild, reconcile", async () => {
  const tenant = await createTenant(t.database.db);
  const key = `${prefix}${usageCounterKey(tenant.id, "api_calls", periodAt("month", clock.now()))}`;
  const first = await recordUsage(deps, systemCtx("test", tenant.id), {
    feature: "api_calls",
    quantity: 3,
    idempotencyKey: "1",
  });
  expect(first).toMatchObject({ recorded: true, counter: null }); // no counter yet: not started at zero
  expect(await raw.client.exists(key)).toBe(0);
  expect(
    await getCurrentUsage(deps, systemCtx("test", tenant.id), { feature: "api_calls", period: "month" }),
  ).toBe(3); // rebuilt from the ledger
  const second = await recordUsage(deps, systemCtx("test", tenant.id), {
    feature: "api_calls",
    quantity: 2,
    idempotencyKey: "2",
  });
  expect(second.counter).toBe(5);
  await raw.client.set(key, "50");
  const pass = await reconcileUsage(deps, systemCtx("test"), { batchSize: 10, intervalMs: 3_600_000 });
  expect(pass.corrections).toEqual([
    expect.objectContaining({ tenantId: tenant.id, cachedBefore: 50, ledgerTotal: 5 }),
  ]);
  expect(await raw.client.get(key)).toBe("5");
});
