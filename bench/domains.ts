// `bun bench/domains.ts`: the TLS permission endpoint (cached hit, platform host, unknown names)
// through the real app, and the domain loop's throughput against the local fixture servers.
import { createApp } from "../src/app.ts";
import { systemCtx } from "../src/context.ts";
import { createDomainTicker } from "../src/custom-domains/checks.ts";
import { createCustomDomain } from "../src/custom-domains/create-custom-domain.ts";
import { createDeps } from "../src/deps.ts";
import { memoryCounterStore } from "../src/security/counter-store.ts";
import { startDohServer } from "../tests/fixtures/doh-server.ts";
import { startGatewayServer } from "../tests/fixtures/gateway-server.ts";
import { testConfig } from "../tests/helpers/app.ts";
import { createTestDatabase } from "../tests/helpers/database.ts";
import { domainSettings, PLATFORM_HOST, publishRecords, uniqueHost } from "../tests/helpers/domains.ts";
import { createTenant } from "../tests/helpers/identity.ts";

const t = await createTestDatabase();
const doh = startDohServer();
const gateway = startGatewayServer();
try {
  const config = testConfig({
    settings: domainSettings(doh, gateway, {
      "TenantDomains:BatchSize": "50",
      "RateLimiting:Global:PermitLimit": "1000000",
    }),
  });
  // counters in memory: measures the endpoint, not the database-backed rate-limit counter of a cache-less run
  const deps = await createDeps(config, {
    database: t.database,
    logWrite: () => {},
    counters: memoryCounterStore(),
  });
  const app = createApp(deps);
  const tenant = await createTenant(t.database.db);

  const domains = [];
  for (let i = 0; i < 500; i++) {
    const d = await createCustomDomain(deps, systemCtx("bench", tenant.id), {
      hostname: uniqueHost("bench"),
      forPlatform: true,
    });
    publishRecords(doh, d);
    domains.push(d);
  }
  const ticker = createDomainTicker(deps);
  let start = performance.now();
  let ticks = 0;
  while ((await ticker.tick()) > 0) ticks++;
  const loopMs = performance.now() - start;
  console.log(
    `loop: ${domains.length} domains Active in ${ticks} ticks, ${loopMs.toFixed(0)} ms (${(loopMs / domains.length).toFixed(2)} ms/domain, local fixtures)`,
  );

  const ask = (domain: string) =>
    app.fetch(new Request(`http://10.0.0.9/api/tls/permission?domain=${domain}`), {
      peerAddress: "10.0.0.9",
    });
  async function measure(name: string, n: number, domainOf: (i: number) => string, expected: number) {
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const s = performance.now();
      const res = await ask(domainOf(i));
      times.push(performance.now() - s);
      if (res.status !== expected) throw new Error(`${name}: ${res.status}`);
      await res.arrayBuffer();
    }
    times.sort((x, y) => x - y);
    const p = (q: number) => (times[Math.floor(q * (times.length - 1))] ?? 0).toFixed(3);
    console.log(`permission ${name}: n=${n} p50=${p(0.5)} ms p99=${p(0.99)} ms`);
  }
  const active = domains[0]?.hostname ?? "";
  start = performance.now();
  await measure("Active domain (cached)", 20_000, () => active, 200);
  await measure("platform host", 20_000, () => PLATFORM_HOST, 200);
  await measure("unknown names (a query each)", 5_000, (i) => `unknown-${i}.example.com`, 404);
  await measure("unknown name repeated (cached)", 20_000, () => "unknown-0.example.com", 404);
  await deps.database.close();
} finally {
  await doh.stop();
  await gateway.stop();
  await t.drop();
}
