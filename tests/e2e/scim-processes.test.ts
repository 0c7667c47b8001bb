import { expect, test } from "bun:test";
import { tenantFeatureOverrides } from "../../src/db/schema/index.ts";
import { useApiPair } from "../helpers/api-pair.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createTenant, createUser } from "../helpers/identity.ts";

/**
 * Two real API processes over one database: a member the directory deactivates (SCIM PATCH
 * `active: false`, Okta's form) or deletes through one process is refused by the other within a
 * second, although both had the member's session cached.
 */

const t = useTestDatabase({ poolSize: 4 });
const { pair, on, signIn, refusedAfter } = useApiPair(t, "e2e-scim");

test("a member the directory deactivates or deletes is refused by every API process within a second", async () => {
  const [first = 0, second = 0] = pair.ports;
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
