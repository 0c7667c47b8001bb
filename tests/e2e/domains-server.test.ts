import { afterAll, beforeAll, expect, test } from "bun:test";
import { tenantDomains } from "../../src/db/schema/index.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { domainRow, EDGE_TARGET, uniqueHost } from "../helpers/domains.ts";
import { createTenant } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";
import { spawnBun } from "../helpers/processes.ts";

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

test("the API process runs the tenant-domain loop from its configuration; the API key never reaches the log", async () => {
  const tenant = await createTenant(t.database.db);
  const hostname = uniqueHost("srv");
  const [row] = await t.database.db
    .insert(tenantDomains)
    .values({ tenantId: tenant.id, hostname, verificationToken: "plinth-e2e-token" })
    .returning();
  if (!row) throw new Error("no domain");
  doh.setTxt(`_plinth-verification.${hostname}`, "plinth-e2e-token");
  doh.setCname(hostname, EDGE_TARGET);

  const server = spawnBun(["src/server.ts"], {
    DATABASE_URL: t.url,
    PORT: "0",
    Database__PoolSize: "3",
    Logging__Level: "debug",
    TenantDomains__PollSeconds: "1",
    TenantDomains__DnsJsonEndpoint: doh.url,
    TenantDomains__GatewayBaseUrl: gateway.baseUrl,
    TenantDomains__GatewayApiKey: gateway.apiKey,
    TenantDomains__AllowedCnameTargets__0: EDGE_TARGET,
  });
  try {
    const started = await server.waitForLine((l) => l.includes('"msg":"background loops started"'));
    expect(JSON.parse(started).running).toContain("tenantDomains");
    await waitFor(async () => (await domainRow(t.database.db, row.id)).status === "Active", {
      what: "domain Active",
      timeoutMs: 15_000,
    });
    expect(gateway.byHostname(hostname)).toBeDefined();
    await server.waitForLine((l) => l.includes('"msg":"tenant domain active"'));
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
    expect(server.lines.join("\n")).not.toContain(gateway.apiKey);
  } finally {
    if (server.proc.exitCode === null) server.proc.kill("SIGKILL");
  }
}, 30_000);
