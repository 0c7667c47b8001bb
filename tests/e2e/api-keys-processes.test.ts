import { afterAll, beforeAll, expect, test } from "bun:test";
import { createApiKey, revokeApiKey } from "../../src/api-keys/keys.ts";
import { systemCtx } from "../../src/context.ts";
import type { Deps } from "../../src/deps.ts";
import { type ApiProcess, startApi } from "../helpers/api-process.ts";
import { relaxedLimits, settingsEnv, testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { createTenant, createUser } from "../helpers/identity.ts";

/**
 * Two real API processes over one database: a key revoked through a third connection (this test's)
 * is refused by both within a second, although both had it cached.
 */

const t = useTestDatabase({ poolSize: 4 });
const servers: ApiProcess[] = [];
let deps: Deps;
let ports: number[] = [];

beforeAll(async () => {
  deps = await testDeps(testConfig(), { database: t.database });
  for (let i = 0; i < 2; i++)
    servers.push(
      startApi({
        DATABASE_URL: t.url,
        BackgroundProcessing__Enabled: "false",
        ...settingsEnv(relaxedLimits),
      }),
    );
  ports = await Promise.all(servers.map((server) => server.listening(30_000)));
}, 60_000);

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
}, 30_000);

const usersOn = (port: number, key: string) =>
  fetch(`http://127.0.0.1:${port}/api/tenant/users`, { headers: { authorization: `Bearer ${key}` } });

test("a revoked key is refused by every API process within a second", async () => {
  const tenant = await createTenant(t.database.db);
  await createUser(t.database.db, tenant.id, { role: "owner" });
  const ctx = systemCtx("e2e", tenant.id);
  const issued = await createApiKey(deps, ctx, { name: "two processes", scopes: ["users:read"] });
  // both processes have the key in their cache (each request within the second re-reads nothing)
  for (const port of ports)
    for (let i = 0; i < 3; i++) expect((await usersOn(port, issued.key)).status).toBe(200);

  await revokeApiKey(deps, ctx, { id: issued.id });
  const committed = performance.now();
  const refusedAfter = await Promise.all(
    ports.map(async (port) => {
      for (;;) {
        const sent = performance.now();
        const response = await usersOn(port, issued.key);
        if (response.status === 401) {
          expect(response.headers.get("www-authenticate")).toContain('error="invalid_token"');
          return sent - committed;
        }
        expect(response.status).toBe(200);
        if (sent - committed > 5_000) throw new Error(`port ${port} still accepts the key after 5 s`);
      }
    }),
  );
  console.log(`revocation seen after ${refusedAfter.map((ms) => `${ms.toFixed(0)} ms`).join(", ")}`);
  for (const ms of refusedAfter) expect(ms).toBeLessThan(1_000);
}, 60_000);
