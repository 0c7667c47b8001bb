import { afterAll, beforeAll, expect, test } from "bun:test";
import { type ApiProcess, startApi } from "../helpers/api-process.ts";
import { relaxedLimits, settingsEnv, useTestDatabase } from "../helpers/app.ts";
import { createTenant, createUser, PASSWORD } from "../helpers/identity.ts";
import { rsaKeys } from "../helpers/production-env.ts";

/**
 * Two real API processes over one database, signing with one key: a member's sessions ended by an
 * admin on one process are refused by the other within a second, although it had them cached.
 */

const t = useTestDatabase({ poolSize: 4 });
const servers: ApiProcess[] = [];
let ports: number[] = [];

beforeAll(async () => {
  const keys = rsaKeys();
  for (let i = 0; i < 2; i++)
    servers.push(
      startApi({
        DATABASE_URL: t.url,
        BackgroundProcessing__Enabled: "false",
        Security__Jwt__CurrentKeyId: "e2e-sessions",
        Security__Jwt__PrivateKey: keys.privateKeyPem,
        ...settingsEnv(relaxedLimits),
      }),
    );
  ports = await Promise.all(servers.map((server) => server.listening(30_000)));
}, 60_000);

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
}, 30_000);

const on = (port: number, path: string, init: RequestInit = {}) =>
  fetch(`http://127.0.0.1:${port}${path}`, init);
async function signIn(port: number, email: string, tenant: string): Promise<string> {
  const response = await on(port, "/api/auth/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password: PASSWORD, tenant }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { accessToken: string }).accessToken;
}

test("a member's sessions ended by an admin are refused by every API process within a second", async () => {
  const [first = 0, second = 0] = ports;
  const tenant = await createTenant(t.database.db);
  const admin = await createUser(t.database.db, tenant.id, { role: "admin" });
  const member = await createUser(t.database.db, tenant.id, { role: "member" });
  const adminToken = await signIn(first, admin.email, tenant.code);
  const memberToken = await signIn(first, member.email, tenant.code);
  const me = (port: number) =>
    on(port, "/api/auth/me", { headers: { authorization: `Bearer ${memberToken}` } });
  // both processes have the session in their cache
  for (const port of [first, second]) for (let i = 0; i < 3; i++) expect((await me(port)).status).toBe(200);

  const ended = await on(first, `/api/tenant/users/${member.id}/sessions`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${adminToken}` },
  });
  expect(ended.status).toBe(204);
  const committed = performance.now();
  const refusedAfter = await Promise.all(
    [first, second].map(async (port) => {
      for (;;) {
        const sent = performance.now();
        const response = await me(port);
        if (response.status === 401) return sent - committed;
        expect(response.status).toBe(200);
        if (sent - committed > 5_000) throw new Error(`port ${port} still accepts the session after 5 s`);
      }
    }),
  );
  console.log(`session end seen after ${refusedAfter.map((ms) => `${ms.toFixed(0)} ms`).join(", ")}`);
  for (const ms of refusedAfter) expect(ms).toBeLessThan(1_000);
}, 60_000);
