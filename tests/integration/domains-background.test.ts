import { afterAll, beforeAll, expect, test } from "bun:test";
import { systemCtx } from "../../src/context.ts";
import { createCustomDomain } from "../../src/custom-domains/create-custom-domain.ts";
import { createDeps } from "../../src/deps.ts";
import { startBackground } from "../../src/loops/background.ts";
import { tenantDomainsLoop } from "../../src/loops/tenant-domains-loop.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { testConfig, useTestDatabase } from "../helpers/app.ts";
import { appDatabaseOf } from "../helpers/database.ts";
import { domainRow, domainSettings, publishRecords, uniqueHost } from "../helpers/domains.ts";
import { createTenant } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";

let doh: DohServer;
let gateway: GatewayServer;

afterAll(async () => {
  await doh.stop();
  await gateway.stop();
}, 60_000);
const t = useTestDatabase();
beforeAll(async () => {
  doh = startDohServer();
  gateway = startGatewayServer();
}, 60_000);

async function start(extra: Record<string, string>) {
  const config = testConfig({
    settings: { "BackgroundProcessing:JobsEnabled": "false", ...domainSettings(doh, gateway, extra) },
  });
  const deps = await createDeps(config, { database: appDatabaseOf(t.database), logWrite: () => {} });
  const background = await startBackground(deps, { loops: { tenantDomains: tenantDomainsLoop } });
  return { deps, background };
}

test("the server's loop factory runs the domain loop: a published domain goes Active", async () => {
  const { deps, background } = await start({ "TenantDomains:PollSeconds": "1" });
  try {
    expect(background.loops.map((l) => l.name)).toContain("tenantDomains");
    const tenant = await createTenant(t.database.db);
    const domain = await createCustomDomain(deps, systemCtx("test", tenant.id), {
      hostname: uniqueHost("bg"),
      forPlatform: true,
    });
    publishRecords(doh, domain);
    await waitFor(async () => (await domainRow(t.database.db, domain.id)).status === "Active", {
      what: "domain Active",
    });
  } finally {
    await background.stop(1_000);
  }
});

test("TenantDomains:Enabled=false: the loop does not run", async () => {
  const { background } = await start({ "TenantDomains:Enabled": "false" });
  try {
    expect(background.loops.map((l) => l.name)).not.toContain("tenantDomains");
  } finally {
    await background.stop(1_000);
  }
});
