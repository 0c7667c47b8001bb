import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import {
  bearer,
  json,
  readyPlatformUser,
  signedInPlatformAdmin,
  signedInTenant,
  signIn,
} from "../helpers/identity.ts";

/** Impersonation: a platform admin signs in as a tenant user for a while, marked, limited and audited. */

const h = useTestApp({ settings: { ...relaxedLimits } });

const impersonate = (accessToken: string, body: Record<string, unknown>) =>
  h.request("/api/admin/impersonations", json(body, { authorization: `Bearer ${accessToken}` }));

test("the token pair acts as the user with act.sub = the admin, shown in /me, kept across refresh", async () => {
  const admin = await signedInPlatformAdmin(h);
  const tenant = await signedInTenant(h);
  const response = await impersonate(admin.accessToken, {
    userId: tenant.member.id,
    tenant: tenant.code,
    reason: "ticket 4711: the customer cannot see their files",
    minutes: 10,
  });
  expect(response.status).toBe(200);
  const pair = (await response.json()) as { accessToken: string; refreshToken: string; expiresIn: number };
  const claims = decodeJwt(pair.accessToken);
  expect(claims.sub).toBe(tenant.member.id);
  expect(claims.tid).toBe(tenant.id);
  expect(claims.act).toEqual({ sub: admin.id });

  const me = await h.request("/api/auth/me", bearer(pair.accessToken));
  expect(me.status).toBe(200);
  expect(await me.json()).toMatchObject({ user: { id: tenant.member.id }, impersonator: { id: admin.id } });
  const own = await h.request("/api/auth/me", tenant.member);
  expect(await own.json()).toMatchObject({ impersonator: null });

  const refreshed = await h.request("/api/auth/refresh", json({ refreshToken: pair.refreshToken }));
  expect(refreshed.status).toBe(200);
  expect(decodeJwt(((await refreshed.json()) as { accessToken: string }).accessToken).act).toEqual({
    sub: admin.id,
  });
  // the user sees the session among theirs, marked, ending within the minutes asked for
  const sessions = (await (await h.request("/api/auth/sessions", tenant.member)).json()) as {
    items: { impersonatorId: string | null; expiresAt: string }[];
  };
  const marked = sessions.items.filter((s) => s.impersonatorId === admin.id);
  expect(marked).toHaveLength(1);
  expect(new Date(marked[0]?.expiresAt ?? 0).getTime() - Date.now()).toBeLessThanOrEqual(10 * 60_000);
});

test("an impersonated session cannot change the password or touch API keys; its actions are audited under both", async () => {
  const admin = await signedInPlatformAdmin(h);
  const tenant = await signedInTenant(h);
  const response = await impersonate(admin.accessToken, {
    userId: tenant.owner.id,
    tenant: tenant.id,
    reason: "checking the owner's webhook setup",
    minutes: 5,
  });
  const { accessToken } = (await response.json()) as { accessToken: string };
  const as = (init: RequestInit = {}) => ({
    ...init,
    headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${accessToken}` },
  });
  const password = await h.request(
    "/api/auth/password",
    as(json({ currentPassword: "whatever-it-is-1", newPassword: "violet-harbour-tangent-42" })),
  );
  expect(password.status).toBe(403);
  const address = await h.request(
    "/api/auth/email/change",
    as(json({ newEmail: "taken-over@example.com", currentPassword: "whatever-it-is-1" })),
  );
  expect(address.status).toBe(403);
  expect((await h.request("/api/tenant/api-keys", as())).status).toBe(403);
  const key = await h.request("/api/tenant/api-keys", as(json({ name: "sneaky", scopes: ["users:read"] })));
  expect(key.status).toBe(403);
  // the real owner still manages keys
  expect((await h.request("/api/tenant/api-keys", tenant.owner)).status).toBe(200);

  const created = await h.request(
    "/api/tenant/users",
    as(
      json({
        email: `imp-${crypto.randomUUID().slice(0, 6)}@example.com`,
        name: "Made",
        password: "violet-harbour-tangent-42",
      }),
    ),
  );
  expect(created.status).toBe(201);
  const { id } = (await created.json()) as { id: string };
  const rows = await execute<{ actor_type: string; actor_id: string; impersonator: string | null }>(
    h.db,
    sql`select actor_type, actor_id, details->>'impersonatorId' as impersonator
        from audit_events where action = 'user.created' and target_id = ${id}`,
  );
  expect(rows).toEqual([{ actor_type: "user", actor_id: tenant.owner.id, impersonator: admin.id }]);
  const started = await execute<{ tenant_id: string | null; actor_id: string; reason: string }>(
    h.db,
    sql`select tenant_id, actor_id, details->>'reason' as reason from audit_events
        where action = 'auth.impersonation_started' and target_id = ${tenant.owner.id} order by id`,
  );
  expect(started).toEqual([
    { tenant_id: tenant.id, actor_id: admin.id, reason: "checking the owner's webhook setup" },
    { tenant_id: null, actor_id: admin.id, reason: "checking the owner's webhook setup" },
  ]);
});

test("only a platform admin impersonates: never a viewer or a tenant user; never staff; at most MaxMinutes", async () => {
  const admin = await signedInPlatformAdmin(h);
  const viewer = await signIn(h, await readyPlatformUser(h.db, { role: "platform_viewer" }));
  const tenant = await signedInTenant(h);
  const body = { userId: tenant.member.id, tenant: tenant.code, reason: "support", minutes: 5 };
  expect((await impersonate(viewer.accessToken, body)).status).toBe(403);
  expect((await impersonate(tenant.owner.accessToken, body)).status).toBe(403);
  expect((await impersonate(admin.accessToken, { ...body, userId: viewer.id })).status).toBe(404);
  expect((await impersonate(admin.accessToken, { ...body, minutes: 61 })).status).toBe(400);
  const other = await signedInTenant(h);
  expect((await impersonate(admin.accessToken, { ...body, tenant: other.code })).status).toBe(404);
  expect((await impersonate(admin.accessToken, { ...body, tenant: "no-such-tenant" })).status).toBe(404);
});
