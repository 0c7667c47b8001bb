import { expect, test } from "bun:test";
import { useApiPair } from "../helpers/api-pair.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createSharedUser, createTenant, createUser } from "../helpers/identity.ts";

/**
 * Two real API processes over one database, signing with one key: a member's sessions ended by an
 * admin on one process are refused by the other within a second, although it had them cached.
 */

const t = useTestDatabase({ poolSize: 4 });
const { pair, on, signIn, refusedAfter } = useApiPair(t, "e2e-sessions");

test("a member's sessions ended by an admin are refused by every API process within a second", async () => {
  const [first = 0, second = 0] = pair.ports;
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
  const seen = await refusedAfter(memberToken, committed);
  console.log(`session end seen after ${seen.map((ms) => `${ms.toFixed(0)} ms`).join(", ")}`);
  for (const ms of seen) expect(ms).toBeLessThan(1_000);
}, 60_000);

test("a tenant a member leaves drops from /me's list on every API process within a second", async () => {
  const [first = 0, second = 0] = pair.ports;
  const [a, b] = [await createTenant(t.database.db), await createTenant(t.database.db)];
  const admin = await createUser(t.database.db, b.id, { role: "admin" });
  const person = await createSharedUser(t.database.db, [{ tenantId: a.id }, { tenantId: b.id }]);
  const adminToken = await signIn(first, admin.email, b.code);
  const token = await signIn(first, person.email, a.code);
  const listed = async (port: number) => {
    const response = await on(port, "/api/auth/me", { headers: { authorization: `Bearer ${token}` } });
    const body = (await response.json()) as { memberships: { tenant: { id: string } }[] };
    return body.memberships.map((m) => m.tenant.id).sort();
  };
  // both processes have the list in their cache
  for (const port of [first, second]) for (let i = 0; i < 3; i++) expect(await listed(port)).toHaveLength(2);

  const disabled = await on(first, `/api/tenant/users/${person.id}/disable`, {
    method: "POST",
    headers: { authorization: `Bearer ${adminToken}` },
  });
  expect(disabled.status).toBe(204);
  const committed = performance.now();
  const seen = await Promise.all(
    pair.ports.map(async (port) => {
      while ((await listed(port)).length > 1) expect(performance.now() - committed).toBeLessThan(5_000);
      expect(await listed(port)).toEqual([a.id]);
      return performance.now() - committed;
    }),
  );
  console.log(`membership change seen after ${seen.map((ms) => `${ms.toFixed(0)} ms`).join(", ")}`);
  for (const ms of seen) expect(ms).toBeLessThan(1_000);
}, 60_000);
