import { afterAll, beforeAll, expect, test } from "bun:test";
import { tenantFeatureOverrides } from "../../src/db/schema/index.ts";
import { type ApiProcess, startApi } from "../helpers/api-process.ts";
import { relaxedLimits, settingsEnv, useTestDatabase } from "../helpers/app.ts";
import { createTenant, createUser, PASSWORD } from "../helpers/identity.ts";
import { rsaKeys } from "../helpers/production-env.ts";

/**
 * Two real API processes over one database: a member the directory deactivates (SCIM PATCH
 * `active: false`, Okta's form) or deletes through one process is refused by the other within a
 * second, although both had the member's session cached.
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
        Security__Jwt__CurrentKeyId: "e2e-scim",
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

/** How long after `committed` each process first refuses `token` (it must answer 200 until then). */
async function refusedAfter(token: string, committed: number): Promise<number[]> {
  return Promise.all(
    ports.map(async (port) => {
      for (;;) {
        const sent = performance.now();
        const response = await on(port, "/api/auth/me", { headers: { authorization: `Bearer ${token}` } });
        if (response.status === 401) return sent - committed;
        expect(response.status).toBe(200);
        if (sent - committed > 5_000) throw new Error(`port ${port} still accepts the session after 5 s`);
      }
    }),
  );
}

test("a member the directory deactivates or deletes is refused by every API process within a second", async () => {
  const [first = 0, second = 0] = ports;
  const tenant = await createTenant(t.database.db);
  await t.database.db
    .insert(tenantFeatureOverrides)
    .values({ tenantId: tenant.id, featureKey: "sso", reason: "e2e" });
  const owner = await createUser(t.database.db, tenant.id, { role: "owner" });
  const deactivated = await createUser(t.database.db, tenant.id);
  const deleted = await createUser(t.database.db, tenant.id);
  const ownerToken = await signIn(first, owner.email, tenant.code);
  const issued = await on(first, "/api/tenant/scim/tokens", {
    method: "POST",
    headers: { authorization: `Bearer ${ownerToken}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "Okta" }),
  });
  expect(issued.status).toBe(201);
  const { token: scimToken } = (await issued.json()) as { token: string };
  const scim = (method: string, path: string, body?: unknown) =>
    on(second, `/scim/v2${path}`, {
      method,
      headers: { authorization: `Bearer ${scimToken}`, "content-type": "application/scim+json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  const tokens = [
    await signIn(first, deactivated.email, tenant.code),
    await signIn(first, deleted.email, tenant.code),
  ];
  for (const token of tokens)
    for (const port of [first, second])
      for (let i = 0; i < 3; i++)
        expect(
          (await on(port, "/api/auth/me", { headers: { authorization: `Bearer ${token}` } })).status,
        ).toBe(200);

  const patched = await scim("PATCH", `/Users/${deactivated.id}`, {
    schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
    Operations: [{ op: "replace", value: { active: false } }],
  });
  expect(patched.status).toBe(200);
  const afterDeactivation = await refusedAfter(tokens[0] ?? "", performance.now());
  expect((await scim("DELETE", `/Users/${deleted.id}`)).status).toBe(204);
  const afterDeletion = await refusedAfter(tokens[1] ?? "", performance.now());
  console.log(
    `SCIM deprovisioning seen after: deactivate ${afterDeactivation.map((ms) => `${ms.toFixed(0)} ms`).join(", ")}; delete ${afterDeletion.map((ms) => `${ms.toFixed(0)} ms`).join(", ")}`,
  );
  for (const ms of [...afterDeactivation, ...afterDeletion]) expect(ms).toBeLessThan(1_000);
}, 60_000);
