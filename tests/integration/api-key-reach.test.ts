import { expect, spyOn, test } from "bun:test";
import * as crypto from "node:crypto";
import { openApiKey } from "../../src/api-keys/key-lookup.ts";
import { applySubscriptionEvent } from "../../src/billing/apply-subscription-event.ts";
import { systemCtx } from "../../src/context.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, loginTokens, signedInTenant } from "../helpers/identity.ts";

// Issue #29: a key's scopes bound what it reaches; a suspended subscription's keys only read; the
// lookup of a key does the same work whether its id exists or not.
const app = useTestApp({ cache: "apikey-reach", settings: relaxedLimits });

const withKey = (key: string) => ({ authorization: `Bearer ${key}` });
const PASSWORD = "a long and unusual passphrase 7";
const newUser = (role: string) => ({
  email: `k${crypto.randomUUID().slice(0, 8)}@example.com`,
  name: "By Key",
  password: PASSWORD,
  role,
});

async function keyOf(
  headers: Record<string, string>,
  scopes: string[],
): Promise<{ id: string; key: string }> {
  const response = await app.request("/api/tenant/api-keys", json({ name: "reach", scopes }, headers));
  if (response.status !== 201) throw new Error(`key refused: ${response.status} ${await response.text()}`);
  return (await response.json()) as { id: string; key: string };
}
const revoke = (headers: Record<string, string>, id: string) =>
  app.request(`/api/tenant/api-keys/${id}`, { method: "DELETE", headers });

test("users:write no longer creates users; users:admin creates members only, and only with a member's reach", async () => {
  const t = await signedInTenant(app, { plan: "pro" });
  const writer = await keyOf(t.owner.headers, ["users:write", "users:*", "storage:*"]);
  // the reported case: users:write with "role":"admin" was 201
  for (const role of ["admin", "member", "owner"]) {
    const response = await app.request("/api/tenant/users", json(newUser(role), withKey(writer.key)));
    expect(`${role} ${response.status}`).toBe(`${role} 403`);
    expect(((await response.json()) as { detail: string }).detail).toContain("users:admin");
  }
  const admin = await keyOf(t.owner.headers, ["users:admin", "storage:*"]);
  for (const role of ["admin", "owner"]) {
    const response = await app.request("/api/tenant/users", json(newUser(role), withKey(admin.key)));
    expect(`${role} ${response.status}`).toBe(`${role} 403`);
  }
  // a key that could not act as a member itself cannot make one
  const narrow = await keyOf(t.owner.headers, ["users:admin"]);
  expect((await app.request("/api/tenant/users", json(newUser("member"), withKey(narrow.key)))).status).toBe(
    403,
  );
  const made = newUser("member");
  const created = await app.request("/api/tenant/users", json(made, withKey(admin.key)));
  expect(created.status).toBe(201);
  const { id: madeId } = (await created.json()) as { id: string };

  // the user a key made signs in as what it is: a member, who manages no keys and reads no audit log
  const first = await loginTokens(app, { email: made.email, password: PASSWORD, tenant: t.code });
  expect(first.passwordChangeRequired).toBe(true);
  const changed = await app.request(
    "/api/auth/password",
    json({ currentPassword: PASSWORD, newPassword: `${PASSWORD} changed` }, withKey(first.accessToken)),
  );
  expect(changed.status).toBeLessThan(300);
  const session = await loginTokens(app, {
    email: made.email,
    password: `${PASSWORD} changed`,
    tenant: t.code,
  });
  const headers = withKey(session.accessToken);
  expect(
    (await app.request("/api/tenant/api-keys", json({ name: "x", scopes: ["users:read"] }, headers))).status,
  ).toBe(403);
  expect((await app.request("/api/tenant/audit-events", { headers })).status).toBe(403);
  expect((await app.request("/api/tenant/users", json(newUser("admin"), headers))).status).toBe(403);

  // users:write changes members (with a member's reach), never an admin or an owner
  for (const target of [t.admin.id, t.owner.id]) {
    const disabled = await app.request(`/api/tenant/users/${target}/disable`, {
      method: "POST",
      headers: withKey(writer.key),
    });
    expect(disabled.status).toBe(403);
    const removed = await app.request(`/api/tenant/users/${target}`, {
      method: "DELETE",
      headers: withKey(writer.key),
    });
    expect(removed.status).toBe(403);
  }
  const bare = await keyOf(t.owner.headers, ["users:write"]);
  expect(
    (await app.request(`/api/tenant/users/${madeId}/disable`, { method: "POST", headers: withKey(bare.key) }))
      .status,
  ).toBe(403);
  expect(
    (
      await app.request(`/api/tenant/users/${madeId}/disable`, {
        method: "POST",
        headers: withKey(writer.key),
      })
    ).status,
  ).toBe(204);
  for (const key of [writer, admin, narrow, bare]) await revoke(t.owner.headers, key.id);
});

test("a suspended subscription's keys read and change nothing; reactivated, they write again", async () => {
  const t = await signedInTenant(app, { plan: "pro" });
  const key = await keyOf(t.owner.headers, ["storage:*", "users:*"]);
  const deleteObject = () =>
    app.request("/api/tenant/storage/objects?key=nothing.txt", {
      method: "DELETE",
      headers: withKey(key.key),
    });
  expect((await deleteObject()).status).not.toBe(403);
  await applySubscriptionEvent(app.deps, systemCtx("test", t.id), { event: "suspend", source: "admin" });
  app.deps.sessionCache.clear();
  expect((await app.request("/api/tenant/users", { headers: withKey(key.key) })).status).toBe(200);
  const refused = await deleteObject();
  expect(refused.status).toBe(403);
  expect(((await refused.json()) as { detail: string }).detail).toContain("suspended");
  expect(
    (
      await app.request(`/api/tenant/users/${t.member.id}/disable`, {
        method: "POST",
        headers: withKey(key.key),
      })
    ).status,
  ).toBe(403);
  await applySubscriptionEvent(app.deps, systemCtx("test", t.id), { event: "reactivate", source: "admin" });
  app.deps.sessionCache.clear();
  expect((await deleteObject()).status).not.toBe(403);
});

/** The statements and hash computations (SHA-256, constant-time comparisons) one lookup costs. */
async function lookupCost(
  presented: string,
): Promise<{ statements: number; hashes: number; compares: number }> {
  let statements = 0;
  app.deps.database.setQueryObserver({
    observe: (_statement, execute) => {
      statements++;
      return execute();
    },
  });
  const hashes = spyOn(crypto, "createHash");
  const compares = spyOn(crypto, "timingSafeEqual");
  try {
    const answer = await openApiKey(app.deps, presented);
    expect(answer).toEqual({ refused: "Invalid API key." });
    return { statements, hashes: hashes.mock.calls.length, compares: compares.mock.calls.length };
  } finally {
    hashes.mockRestore();
    compares.mockRestore();
    app.deps.database.setQueryObserver(undefined);
  }
}

test("a known key id with a wrong secret costs what an unknown id costs: statements and hashes", async () => {
  const t = await signedInTenant(app);
  const known = await keyOf(t.owner.headers, ["users:read"]);
  const prefix = known.key.slice(0, 16);
  const wrongSecret = `${prefix}_${"A".repeat(32)}`;
  const unknownId = `plk_${"Z".repeat(12)}_${"A".repeat(32)}`;
  app.deps.sessionCache.clear();
  const coldKnown = await lookupCost(wrongSecret);
  const coldUnknown = await lookupCost(unknownId);
  expect(coldKnown.statements).toBe(1);
  expect(coldUnknown).toEqual(coldKnown);
  // the unknown id is remembered as the known one is: the next lookup of either asks nothing
  const warmKnown = await lookupCost(wrongSecret);
  const warmUnknown = await lookupCost(unknownId);
  expect(warmKnown.statements).toBe(0);
  expect(warmUnknown).toEqual(warmKnown);
  expect(warmKnown.compares).toBe(2);
  // a rolled key (a replaced secret in grace) costs the same too
  const rolled = await app.request(`/api/tenant/api-keys/${known.id}/roll`, json({}, t.owner.headers));
  expect(rolled.status).toBe(200);
  app.deps.sessionCache.clear();
  expect(await lookupCost(wrongSecret)).toEqual(coldKnown);
});
