import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import {
  bearer,
  createUser,
  json,
  PASSWORD,
  signedInPlatformAdmin,
  signedInTenant,
} from "../helpers/identity.ts";

/** A user's own sessions (list, end one, end the others) and a member's sessions ended by an admin. */

const h = useTestApp({ settings: { ...relaxedLimits } });

interface SessionList {
  items: { id: string; current: boolean; client: string | null; address: string | null; kind: string }[];
  nextCursor: string | null;
}

async function signInAs(email: string, tenant: string, agent: string) {
  const response = await h.request(
    "/api/auth/login",
    json({ email, password: PASSWORD, tenant }, { "user-agent": agent }),
  );
  expect(response.status).toBe(200);
  return (await response.json()) as { accessToken: string; refreshToken: string };
}

const list = async (accessToken: string, query = "") => {
  const response = await h.request(`/api/auth/sessions${query}`, bearer(accessToken));
  expect(response.status).toBe(200);
  return (await response.json()) as SessionList;
};
const del = (path: string, accessToken: string) =>
  h.request(path, { ...bearer(accessToken), method: "DELETE" });

test("a user lists their sessions (client, address, current) and ends one, then all the others", async () => {
  const tenant = await signedInTenant(h);
  const user = await createUser(h.db, tenant.id, { role: "member" });
  const phone = await signInAs(user.email, tenant.code, "Phone/1.0");
  const laptop = await signInAs(user.email, tenant.code, "Laptop/2.0");
  const tablet = await signInAs(user.email, tenant.code, "Tablet/3.0");

  const seen = await list(laptop.accessToken);
  expect(seen.items.map((s) => s.client)).toEqual(["Tablet/3.0", "Laptop/2.0", "Phone/1.0"]);
  expect(seen.items.filter((s) => s.current).map((s) => s.client)).toEqual(["Laptop/2.0"]);
  expect(seen.items.every((s) => s.address === "127.0.0.1" && s.kind === "token")).toBe(true);
  const paged = await list(laptop.accessToken, "?limit=2");
  expect(paged.items).toHaveLength(2);
  const rest = await list(laptop.accessToken, `?limit=2&cursor=${paged.nextCursor}`);
  expect(rest.items.map((s) => s.client)).toEqual(["Phone/1.0"]);

  const phoneId = seen.items.find((s) => s.client === "Phone/1.0")?.id ?? "";
  expect((await del(`/api/auth/sessions/${phoneId}`, laptop.accessToken)).status).toBe(204);
  expect((await h.request("/api/auth/me", bearer(phone.accessToken))).status).toBe(401);
  expect((await h.request("/api/auth/refresh", json({ refreshToken: phone.refreshToken }))).status).toBe(401);
  expect((await del(`/api/auth/sessions/${phoneId}`, laptop.accessToken)).status).toBe(404);
  // another user's session is not the caller's: 404, and it stays open
  const ownerSession = (await list(tenant.owner.accessToken)).items[0]?.id ?? "";
  expect((await del(`/api/auth/sessions/${ownerSession}`, laptop.accessToken)).status).toBe(404);
  expect((await h.request("/api/auth/me", tenant.owner)).status).toBe(200);

  expect((await del("/api/auth/sessions", laptop.accessToken)).status).toBe(204);
  expect((await h.request("/api/auth/me", bearer(tablet.accessToken))).status).toBe(401);
  expect((await h.request("/api/auth/me", bearer(laptop.accessToken))).status).toBe(200);
  expect((await list(laptop.accessToken)).items.map((s) => s.client)).toEqual(["Laptop/2.0"]);

  const audit = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from audit_events where action = 'auth.session_ended' and tenant_id = ${tenant.id}`,
  );
  expect(audit[0]?.n).toBe(2);
});

test("owners and admins end a member's sessions; an admin not an owner's; a member nobody's; other tenants 404", async () => {
  const tenant = await signedInTenant(h);
  const other = await signedInTenant(h);
  const path = (userId: string) => `/api/tenant/users/${userId}/sessions`;
  expect((await del(path(tenant.admin.id), tenant.member.accessToken)).status).toBe(403);
  expect((await del(path(tenant.owner.id), tenant.admin.accessToken)).status).toBe(403);
  expect((await del(path(other.member.id), tenant.admin.accessToken)).status).toBe(404);
  expect((await h.request("/api/auth/me", other.member)).status).toBe(200);

  expect((await del(path(tenant.member.id), tenant.admin.accessToken)).status).toBe(204);
  expect((await h.request("/api/auth/me", tenant.member)).status).toBe(401);
  expect((await del(path(tenant.admin.id), tenant.owner.accessToken)).status).toBe(204);
  expect((await h.request("/api/auth/me", tenant.admin)).status).toBe(401);

  const admin = await signedInPlatformAdmin(h);
  const adminPath = `/api/admin/tenants/${tenant.id}/users/${tenant.owner.id}/sessions`;
  expect((await del(adminPath, admin.accessToken)).status).toBe(204);
  expect((await h.request("/api/auth/me", tenant.owner)).status).toBe(401);
  expect(
    (await del(`/api/admin/tenants/${other.id}/users/${tenant.owner.id}/sessions`, admin.accessToken)).status,
  ).toBe(404);
});
