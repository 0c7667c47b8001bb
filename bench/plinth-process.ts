import { openSync, writeSync } from "node:fs";
import { loadConfig } from "../src/config/load.ts";
import { createDeps, type Deps } from "../src/deps.ts";
import { bufferedLines } from "../src/telemetry/logger.ts";
import { createTestDatabase, type TestDatabase } from "../tests/helpers/database.ts";

/**
 * Plinth's shared objects as an API process builds them, for an HTTP benchmark: a fresh migrated
 * database, the local Redis, rate limits out of the way (the per-tenant one off), no background loops, and the server's own
 * log sink (one write per event-loop turn) aimed at /dev/null instead of stdout.
 */
export async function benchDeps(
  name: string,
  env: Record<string, string> = {},
): Promise<{ deps: Deps; database: TestDatabase }> {
  const database = await createTestDatabase({ poolSize: 1 });
  await database.database.close();
  const devNull = openSync("/dev/null", "w");
  const config = loadConfig({
    env: {
      DATABASE_URL: database.url,
      CACHE_URL: "redis://127.0.0.1:6379",
      RateLimiting__Global__PermitLimit: "1000000000",
      RateLimiting__Auth__PermitLimit: "1000000000",
      // the plan's rate per tenant (free: 600 a minute) would refuse a load test: on only where a
      // bench measures it (`::RateLimiting__Tenant__Enabled=true` in bench/ab-trees.ts)
      RateLimiting__Tenant__Enabled: "false",
      // and the plan's api_calls a month (free: 10,000) would refuse it too
      FeatureUsageReconciliation__CountApiCalls: "false",
      BackgroundProcessing__Enabled: "false",
      ...env,
    },
    configDir: "/nonexistent",
  });
  const sink = bufferedLines((chunk) => writeSync(devNull, chunk));
  const deps = await createDeps(config, {
    cachePrefix: `plinth:bench-${name}-${process.pid}:`,
    logWrite: sink.write,
  });
  await deps.cache?.waitReady(3_000);
  return { deps, database };
}
