import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { tenantDomains } from "../../src/db/schema/index.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { type OwnCaddy, ownCaddy } from "../helpers/caddy.ts";
import { tracked } from "../helpers/children.ts";
import { createTenant } from "../helpers/identity.ts";
import { ROOT } from "../helpers/process.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";
import { freePort } from "../helpers/redis-server.ts";

/**
 * deploy/caddy/Caddyfile as shipped, in front of a running Plinth: TLS from Caddy's internal CA,
 * certificates on demand for the names /api/tls/permission allows (the platform host, a tenant's
 * Active custom domain) and a failed handshake for any other name.
 */

const PLATFORM = "platform.caddy.test";
const TENANT_DOMAIN = `shop-${crypto.randomUUID().slice(0, 8)}.caddy.test`;
const t = useTestDatabase();
let api: Child;
let caddy: OwnCaddy;

beforeAll(async () => {
  const tenant = await createTenant(t.database.db);
  await t.database.db.insert(tenantDomains).values({
    tenantId: tenant.id,
    hostname: TENANT_DOMAIN,
    status: "Active",
    verificationToken: "caddy-test",
  });

  const apiPort = await freePort();
  api = spawnBun([join(ROOT, "src/server.ts")], {
    DATABASE_URL: t.url,
    PORT: String(apiPort),
    BackgroundProcessing__Enabled: "false",
    Tenancy__Resolution__PlatformHost: PLATFORM,
    AllowedHosts__0: PLATFORM,
    Tenancy__Resolution__TrustedProxies__0: "127.0.0.1",
  });
  await api.waitForLine((l) => l.includes('"msg":"listening"'), 30_000);

  caddy = await ownCaddy(apiPort);
}, 90_000);

afterAll(() => caddy?.stop());

/** `curl` over HTTPS to `host` on Caddy's port (resolved to 127.0.0.1), trusting only Caddy's root. */
async function curl(host: string, path: string): Promise<{ exit: number; status: string; body: string }> {
  const proc = tracked(
    Bun.spawn(
      [
        "curl",
        "-sS",
        "--max-time",
        "20",
        "--resolve",
        `${host}:${caddy.httpsPort}:127.0.0.1`,
        "--cacert",
        caddy.rootCa,
        "-w",
        "\n%{http_code}",
        `https://${host}:${caddy.httpsPort}${path}`,
      ],
      { stdout: "pipe", stderr: "pipe" },
    ),
  );
  const [out, err, exit] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  const at = out.lastIndexOf("\n");
  return { exit, status: out.slice(at + 1), body: out.slice(0, at) + err };
}

/** Caddy answers once its CA exists and the upstream is healthy; the first answer may take a moment. */
async function firstAnswer(host: string, path: string) {
  await caddy.caReady();
  const deadline = Date.now() + 45_000;
  for (;;) {
    const answer = await curl(host, path);
    if (answer.exit === 0 && answer.status !== "503") return answer;
    // Caddy's log says why (an `ask` that failed or timed out, a listener that did not bind)
    if (Date.now() > deadline) return { ...answer, body: `${answer.body}\ncaddy's log:\n${caddy.logTail()}` };
    await Bun.sleep(250);
  }
}

test("a tenant's Active custom domain gets a certificate on demand and reaches the API over HTTPS", async () => {
  const health = await firstAnswer(TENANT_DOMAIN, "/api/health");
  expect(health).toMatchObject({ exit: 0, status: "200" });
  // the platform host too: the console and the API through the proxy
  const console = await curl(PLATFORM, "/console/sign-in");
  expect(console).toMatchObject({ exit: 0, status: "200" });
  expect(console.body).toContain("<form");
  const ready = await curl(PLATFORM, "/api/health/ready");
  expect(ready).toMatchObject({ exit: 0, status: "200" });
}, 60_000);

test("an unknown name gets no certificate: the handshake fails and the API is never reached", async () => {
  await firstAnswer(TENANT_DOMAIN, "/api/health");
  const probe = `/api/probe-${crypto.randomUUID()}`;
  const unknown = await curl(`unknown-${TENANT_DOMAIN}`, probe);
  expect(unknown.exit).not.toBe(0);
  expect(unknown.status).toBe("000");
  // a request sent afterwards through Caddy is logged after anything the probe could have caused
  const marker = `/api/marker-${crypto.randomUUID()}`;
  expect((await curl(TENANT_DOMAIN, marker)).status).toBe("404");
  await api.waitForLine((l) => l.includes(`"path":"${marker}"`));
  const requests = api.lines
    .filter((l) => l.includes('"msg":"request"'))
    .map((l) => JSON.parse(l) as { path: string; status: number });
  expect(requests.filter((r) => r.path === probe)).toEqual([]);
  // Caddy asked, and Plinth said no
  expect(requests.filter((r) => r.path === "/api/tls/permission").map((r) => r.status)).toContain(404);
}, 60_000);
