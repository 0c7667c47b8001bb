/**
 * Usage metering figures: `recordUsage` throughput and latency (ledger insert + shared counter lock
 * + cache increment in one transaction) for one hot tenant × feature and spread over many tenants,
 * the limit check (`assertFeature`: cached features + cached counter), and one reconciliation pass
 * over many counters.
 *
 *   bun bench/usage.ts [--events 5000] [--concurrency 32] [--tenants 200]
 *
 * Needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379 (a scratch database and a unique
 * key prefix, both removed at the end). Prints one table; copy it into docs/performance.md.
 */

import { parseArgs } from "node:util";
import { assertFeature } from "../src/billing/entitlements.ts";
import { systemClock } from "../src/clock.ts";
import { systemCtx } from "../src/context.ts";
import { getCurrentUsage } from "../src/usage/current-usage.ts";
import { reconcileUsage } from "../src/usage/reconcile.ts";
import { recordUsage } from "../src/usage/record-usage.ts";
import { testConfig, testDeps } from "../tests/helpers/app.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "../tests/helpers/cache.ts";
import { createTestDatabase } from "../tests/helpers/database.ts";
import { createTenant } from "../tests/helpers/identity.ts";
import { drive } from "./stats.ts";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "5000" },
    concurrency: { type: "string", default: "32" },
    tenants: { type: "string", default: "200" },
  },
});
const events = Number(values.events);
const concurrency = Number(values.concurrency);
const tenantCount = Number(values.tenants);

const t = await createTestDatabase({ poolSize: Math.min(concurrency, 20) });
const prefix = uniquePrefix("bench-usage");
const raw = rawRedis();
const deps = await testDeps(testConfig({ cacheUrl: REDIS_URL }), {
  database: t.database,
  clock: systemClock,
  cachePrefix: prefix,
});

try {
  const tenants: string[] = [];
  for (let i = 0; i < tenantCount; i++) tenants.push((await createTenant(t.database.db)).id);
  const hot = tenants[0] as string;
  for (const id of tenants)
    await getCurrentUsage(deps, systemCtx("bench", id), { feature: "api_calls", period: "month" });

  const rows: [string, Awaited<ReturnType<typeof drive>>][] = [];
  rows.push([
    "recordUsage, one tenant × feature",
    await drive(events, concurrency, (i) =>
      recordUsage(deps, systemCtx("bench", hot), {
        feature: "api_calls",
        quantity: 1,
        idempotencyKey: `hot-${i}`,
      }),
    ),
  ]);
  rows.push([
    `recordUsage, ${tenantCount} tenants`,
    await drive(events, concurrency, (i) =>
      recordUsage(deps, systemCtx("bench", tenants[i % tenantCount] as string), {
        feature: "api_calls",
        quantity: 1,
        idempotencyKey: `spread-${i}`,
      }),
    ),
  ]);
  rows.push([
    "recordUsage, duplicate key",
    await drive(events, concurrency, () =>
      recordUsage(deps, systemCtx("bench", hot), {
        feature: "api_calls",
        quantity: 1,
        idempotencyKey: "hot-0",
      }),
    ),
  ]);
  rows.push([
    "assertFeature (cached)",
    await drive(events, concurrency, (i) =>
      assertFeature(deps, systemCtx("bench", tenants[i % tenantCount] as string), { feature: "api_calls" }),
    ),
  ]);

  const counter = Number(
    await raw.client.get(`${prefix}usage:${hot}:api_calls:${new Date().toISOString().slice(0, 7)}`),
  );
  const started = performance.now();
  const pass = await reconcileUsage(deps, systemCtx("bench"), { batchSize: 100, intervalMs: 60 * 60_000 });
  const passMs = performance.now() - started;

  console.log(`events per row: ${events}, concurrency: ${concurrency}, tenants: ${tenantCount}`);
  console.log("| operation | ops/s | p50 ms | p95 ms | p99 ms |");
  console.log("| --- | --- | --- | --- | --- |");
  for (const [name, r] of rows)
    console.log(
      `| ${name} | ${r.perSecond} | ${r.p50.toFixed(2)} | ${r.p95.toFixed(2)} | ${r.p99.toFixed(2)} |`,
    );
  console.log(
    `\nreconciliation pass: ${pass.reconciled} counters in ${passMs.toFixed(0)} ms (${pass.corrections.length} corrections); hot counter ${counter} (its own ${events} plus every ${tenantCount}th spread event)`,
  );
} finally {
  await deps.cache?.close();
  await raw.cleanup(prefix);
  raw.close();
  await t.drop();
}
