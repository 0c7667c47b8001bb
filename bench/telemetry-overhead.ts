/**
 * Cost of telemetry on the request path: the real app (`createApp`) over PostgreSQL, driven through
 * `app.fetch` (no sockets), in three variants, interleaved round by round so drift hits all alike:
 *
 *   off        no `OpenTelemetry:OtlpEndpoint` (the default): no spans, the plain fetch
 *   recording  spans and metrics made but dropped (a no-op processor): the instrumentation's own cost
 *   exporting  spans batched and sent over OTLP/HTTP to a local collector (tests/fixtures)
 *
 * Routes: GET /api/health (no database) and GET /api/auth/me (JWT check plus the session and user
 * statements: three database spans per request).
 *
 *   bun bench/telemetry-overhead.ts [--requests 3000] [--concurrency 16] [--rounds 5]
 *
 * Needs PostgreSQL on 127.0.0.1:5432 (a scratch database is created and dropped).
 */
import { parseArgs } from "node:util";
import { NoopSpanProcessor } from "@opentelemetry/sdk-trace";
import { sql } from "drizzle-orm";
import { createApp } from "../src/app.ts";
import { execute } from "../src/db/client.ts";
import { createDeps, type Deps } from "../src/deps.ts";
import { memoryCounterStore } from "../src/security/counter-store.ts";
import { createQueryObserver } from "../src/telemetry/db.ts";
import { disabledTelemetry, type Telemetry } from "../src/telemetry/otel.ts";
import { createTelemetry } from "../src/telemetry/sdk.ts";
import { startOtlpCollector } from "../tests/fixtures/otlp-collector.ts";
import { envConfig } from "../tests/helpers/app.ts";
import { createTestDatabase } from "../tests/helpers/database.ts";
import { createPlatformAdmin, PASSWORD } from "../tests/helpers/identity.ts";
import { rsaKeys } from "../tests/helpers/production-env.ts";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "3000" },
    concurrency: { type: "string", default: "16" },
    rounds: { type: "string", default: "5" },
  },
});
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);

const t = await createTestDatabase({ poolSize: 10 });
const collector = startOtlpCollector();
const admin = await createPlatformAdmin(t.database.db);
await execute(t.database.db, sql`update users set must_change_password = false where id = ${admin.id}`);
const config = envConfig({
  DATABASE_URL: t.url,
  Logging__Level: "error",
  RateLimiting__Global__PermitLimit: "100000000",
  RateLimiting__Auth__PermitLimit: "100000000",
  // one signing key for the three app instances, so one token serves them all
  Security__Jwt__CurrentKeyId: "bench",
  Security__Jwt__PrivateKey: rsaKeys().privateKeyPem,
});

type Variant = "off" | "recording" | "exporting";
const telemetries: Record<Variant, Telemetry> = {
  off: disabledTelemetry(),
  recording: createTelemetry({ serviceName: "bench", spanProcessors: [new NoopSpanProcessor()] }),
  exporting: createTelemetry({ serviceName: "bench", endpoint: collector.url, metricIntervalMs: 5_000 }),
};
const apps = {} as Record<Variant, { deps: Deps; app: ReturnType<typeof createApp> }>;
for (const variant of Object.keys(telemetries) as Variant[]) {
  const deps = await createDeps(config, {
    database: t.database,
    telemetry: telemetries[variant],
    // rate-limit counters in memory: the database store's per-IP row would serialise the run
    counters: memoryCounterStore(),
    logWrite: () => {},
  });
  apps[variant] = { deps, app: createApp(deps) };
}

const login = await apps.off.app.fetch(
  new Request("http://localhost/api/auth/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: admin.email, password: PASSWORD }),
  }),
  { peerAddress: "127.0.0.1" },
);
const { accessToken } = (await login.json()) as { accessToken: string };

async function drive(variant: Variant, path: string): Promise<{ rps: number; p50: number; p99: number }> {
  const { app, deps } = apps[variant];
  // the query observer is per database: point it at this variant's telemetry
  deps.database.setQueryObserver(observers[variant]);
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        next++;
        const t0 = performance.now();
        const res = await app.fetch(
          new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${accessToken}` } }),
          { peerAddress: "127.0.0.1" },
        );
        if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
        await res.arrayBuffer();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { rps: REQUESTS / seconds, p50: at(0.5), p99: at(0.99) };
}

// createDeps set the observer of the shared database each time; keep each variant's own
const observers = Object.fromEntries(
  (Object.keys(telemetries) as Variant[]).map((v) => [
    v,
    createQueryObserver({ telemetry: telemetries[v], logger: apps[v].deps.logger, slowQueryMs: 10_000 }),
  ]),
) as Record<Variant, ReturnType<typeof createQueryObserver>>;

const results: Record<string, { rps: number[]; p50: number[]; p99: number[] }> = {};
for (const path of ["/api/health", "/api/auth/me"]) {
  for (const variant of Object.keys(apps) as Variant[]) await drive(variant, path); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of Object.keys(apps) as Variant[]) {
      const r = await drive(variant, path);
      const key = `${path} ${variant}`;
      results[key] ??= { rps: [], p50: [], p99: [] };
      results[key].rps.push(r.rps);
      results[key].p50.push(r.p50);
      results[key].p99.push(r.p99);
    }
  }
}
await telemetries.exporting.flush();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
console.log(
  `telemetry overhead: ${REQUESTS} requests × ${ROUNDS} rounds, concurrency ${CONCURRENCY}, app.fetch, Bun ${Bun.version}`,
);
console.log("| route | telemetry | req/s (median) | vs off | p50 ms | p99 ms |");
console.log("| --- | --- | ---: | ---: | ---: | ---: |");
for (const path of ["/api/health", "/api/auth/me"]) {
  const off = median(results[`${path} off`]?.rps ?? []);
  for (const variant of Object.keys(apps) as Variant[]) {
    const r = results[`${path} ${variant}`];
    if (!r) continue;
    const rps = median(r.rps);
    const delta = variant === "off" ? "—" : `${(((rps - off) / off) * 100).toFixed(1)}%`;
    console.log(
      `| ${path} | ${variant} | ${Math.round(rps)} | ${delta} | ${median(r.p50).toFixed(2)} | ${median(r.p99).toFixed(2)} |`,
    );
  }
}
console.log(`spans received by the collector (exporting): ${collector.spans.length}`);

// what "off" adds per database statement: the observer's clock reads and operation parse
{
  const observer = observers.off;
  const statement = `select "id", "tenant_id", "kind" from "sessions" where ("sessions"."id" = $1 and "sessions"."revoked_at" is null) limit $2`;
  const done = Promise.resolve([]);
  const run = () => done;
  const n = 200_000;
  for (let i = 0; i < 10_000; i++) await observer.observe(statement, run);
  let t0 = performance.now();
  for (let i = 0; i < n; i++) await observer.observe(statement, run);
  const observed = (performance.now() - t0) / n;
  t0 = performance.now();
  for (let i = 0; i < n; i++) await run();
  const bare = (performance.now() - t0) / n;
  console.log(
    `query observer with telemetry off: ${((observed - bare) * 1000).toFixed(2)} µs per statement (${n} statements, no database)`,
  );
}

for (const v of Object.keys(telemetries) as Variant[]) await telemetries[v].shutdown();
await collector.stop();
await t.drop();
process.exit(0);
