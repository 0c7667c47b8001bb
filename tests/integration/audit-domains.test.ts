import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { createDomainTicker } from "../../src/custom-domains/checks.ts";
import { createCustomDomain } from "../../src/custom-domains/create-custom-domain.ts";
import { execute } from "../../src/db/client.ts";
import { createDeps, type Deps } from "../../src/deps.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { testConfig, useTestDatabase } from "../helpers/app.ts";
import { appDatabaseOf } from "../helpers/database.ts";
import { domainSettings, publishRecords, uniqueHost } from "../helpers/domains.ts";
import { createTenant } from "../helpers/identity.ts";

let doh: DohServer;
let gateway: GatewayServer;
let deps: Deps;
const clock = new ManualClock("2026-11-23T00:00:00Z");
const t = useTestDatabase();
beforeAll(async () => {
  doh = startDohServer();
  gateway = startGatewayServer();
  deps = await createDeps(testConfig({ settings: domainSettings(doh, gateway) }), {
    database: appDatabaseOf(t.database),
    clock,
    logWrite: () => {},
  });
}, 60_000);
afterAll(async () => {
  await doh.stop();
  await gateway.stop();
}, 60_000);

test("the domain loop's activation records domain.activated once, by the system, in the tenant's chain", async () => {
  const tenantId = (await createTenant(t.database.db)).id;
  const domain = await createCustomDomain(deps, systemCtx("test", tenantId), {
    hostname: uniqueHost(),
    forPlatform: true,
  });
  publishRecords(doh, domain);
  expect(await createDomainTicker(deps).tick()).toBe(1);
  const rows = await execute<{
    action: string;
    actor_type: string;
    actor_id: string;
    target_id: string;
    details: object;
  }>(
    t.database.db,
    sql`select action, actor_type, actor_id, target_id, details from audit_events where tenant_id = ${tenantId} order by audit_events.id`,
  );
  expect(rows).toEqual([
    {
      action: "domain.added",
      actor_type: "system",
      actor_id: "test",
      target_id: domain.id,
      details: { hostname: domain.hostname },
    },
    {
      action: "domain.activated",
      actor_type: "system",
      actor_id: "tenant-domains",
      target_id: domain.id,
      details: { hostname: domain.hostname },
    },
  ]);
  // checked again later (the certificate), it stays Active: no second activation
  clock.advance(3_600_000);
  await t.database.db.execute(sql`update tenant_domains set next_check_at = now() - interval '1 second'`);
  await createDomainTicker(deps).tick();
  const [count] = await execute<{ n: number }>(
    t.database.db,
    sql`select count(*)::int as n from audit_events where tenant_id = ${tenantId} and action = 'domain.activated'`,
  );
  expect(count?.n).toBe(1);
});
