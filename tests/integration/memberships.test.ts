import { describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { decodeJwt } from "jose";
import { users } from "../../src/db/schema/index.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import {
  activeDomain,
  bearer,
  createSharedUser,
  createUser,
  json,
  login,
  loginTokens,
  PASSWORD,
  readyPlatformUser,
  signedInTenant,
} from "../helpers/identity.ts";

// Issue #32 point 2: one identity, several tenants (docs/decisions.md "One identity, several tenants").

const app = useTestApp({ settings: relaxedLimits });

const claimsOf = (token: string) => decodeJwt(token) as { tid: string | null; roles: string[]; sub: string };

describe("a person in two tenants", () => {
  test("signs in to each with one password; /me lists both; switch changes the tenant claim", async () => {
    const a = await signedInTenant(app);
    const b = await signedInTenant(app);
    const pat = await createSharedUser(app.db, [
      { tenantId: a.id, role: "admin" },
      { tenantId: b.id, role: "member" },
    ]);
    const inA = await loginTokens(app, { email: pat.email, tenant: a.code });
    expect(claimsOf(inA.accessToken)).toMatchObject({ tid: a.id, roles: ["admin"], sub: pat.id });
    const me = await app.request("/api/auth/me", bearer(inA.accessToken));
    expect(me.status).toBe(200);
    const body = (await me.json()) as { tenant: { id: string }; roles: string[]; memberships: unknown[] };
    expect(body.tenant.id).toBe(a.id);
    expect(body.roles).toEqual(["admin"]);
    expect(body.memberships).toEqual(
      [
        { tenant: { id: a.id, code: a.code, name: a.name }, role: "admin" },
        { tenant: { id: b.id, code: b.code, name: b.name }, role: "member" },
      ].sort((x, y) => x.tenant.code.localeCompare(y.tenant.code)),
    );

    // by code, then back by id: no password, a token whose tenant claim changed
    const switched = await app.request(
      "/api/auth/switch",
      json({ tenant: b.code }, bearer(inA.accessToken).headers as Record<string, string>),
    );
    expect(switched.status).toBe(200);
    const inB = (await switched.json()) as { accessToken: string; refreshToken: string };
    expect(claimsOf(inB.accessToken)).toMatchObject({ tid: b.id, roles: ["member"], sub: pat.id });
    const users = await app.request("/api/tenant/users", bearer(inB.accessToken));
    expect(users.status).toBe(403); // a member of B, not an admin there
    const back = await app.request(
      "/api/auth/switch",
      json({ tenant: a.id }, { authorization: `Bearer ${inB.accessToken}` }),
    );
    expect(back.status).toBe(200);
    expect(claimsOf(((await back.json()) as { accessToken: string }).accessToken).tid).toBe(a.id);
    // the session it came from is still open, and B's refresh token stays in B
    expect((await app.request("/api/auth/me", bearer(inA.accessToken))).status).toBe(200);
    const refreshed = await app.request("/api/auth/refresh", json({ refreshToken: inB.refreshToken }));
    expect(refreshed.status).toBe(200);
    expect(claimsOf(((await refreshed.json()) as { accessToken: string }).accessToken).tid).toBe(b.id);
  });

  test("switching to a tenant the caller is not in is 404, whether it exists or not", async () => {
    const a = await signedInTenant(app);
    const c = await signedInTenant(app);
    const headers = { authorization: `Bearer ${a.owner.accessToken}` };
    const answers = await Promise.all(
      [c.code, c.id, "no-such-tenant", crypto.randomUUID()].map(async (tenant) => {
        const response = await app.request("/api/auth/switch", json({ tenant }, headers));
        return [response.status, ((await response.json()) as { detail?: string }).detail];
      }),
    );
    expect(new Set(answers.map((x) => JSON.stringify(x))).size).toBe(1);
    expect(answers[0]?.[0]).toBe(404);
    // its own tenant is fine: a fresh session there
    expect((await app.request("/api/auth/switch", json({ tenant: a.code }, headers))).status).toBe(200);
  });

  test("platform staff stay apart: no memberships, no switch, no tenant sign-in", async () => {
    const a = await signedInTenant(app);
    const staff = await readyPlatformUser(app.db);
    const tokens = await loginTokens(app, { email: staff.email });
    const me = (await (await app.request("/api/auth/me", bearer(tokens.accessToken))).json()) as {
      memberships: unknown[];
    };
    expect(me.memberships).toEqual([]);
    const switched = await app.request(
      "/api/auth/switch",
      json({ tenant: a.code }, { authorization: `Bearer ${tokens.accessToken}` }),
    );
    expect(switched.status).toBe(404);
    expect((await login(app, { email: staff.email, tenant: a.code })).status).toBe(401);
    // and a shared identity does not sign in as staff (no tenant: staff only)
    const pat = await createSharedUser(app.db, [{ tenantId: a.id, role: "member" }]);
    expect((await login(app, { email: pat.email })).status).toBe(401);
  });

  test("disabling or removing a member in one tenant leaves the other", async () => {
    const a = await signedInTenant(app);
    const b = await signedInTenant(app);
    const pat = await createSharedUser(app.db, [
      { tenantId: a.id, role: "member" },
      { tenantId: b.id, role: "member" },
    ]);
    const inA = await loginTokens(app, { email: pat.email, tenant: a.code });
    const inB = await loginTokens(app, { email: pat.email, tenant: b.code });
    // A's admin lists and disables them
    const listed = (await (await app.request("/api/tenant/users", bearer(a.admin.accessToken))).json()) as {
      items: { id: string; status: string }[];
    };
    expect(listed.items.map((u) => u.id)).toContain(pat.id);
    const disabled = await app.request(`/api/tenant/users/${pat.id}/disable`, {
      method: "POST",
      headers: { authorization: `Bearer ${a.admin.accessToken}` },
    });
    expect(disabled.status).toBe(204);
    expect((await app.request("/api/auth/me", bearer(inA.accessToken))).status).toBe(401);
    expect((await login(app, { email: pat.email, tenant: a.code })).status).toBe(401);
    expect((await app.request("/api/auth/me", bearer(inB.accessToken))).status).toBe(200);
    expect((await login(app, { email: pat.email, tenant: b.code })).status).toBe(200);
    const inBMe = (await (await app.request("/api/auth/me", bearer(inB.accessToken))).json()) as {
      memberships: { tenant: { id: string } }[];
    };
    expect(inBMe.memberships.map((m) => m.tenant.id)).toEqual([b.id]);

    // B's owner removes them from B: the person stays (a membership of neither tenant, no sign-in)
    const removed = await app.request(`/api/tenant/users/${pat.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${b.owner.accessToken}` },
    });
    expect(removed.status).toBe(204);
    expect((await app.request("/api/auth/me", bearer(inB.accessToken))).status).toBe(401);
    expect((await login(app, { email: pat.email, tenant: b.code })).status).toBe(401);
    const [row] = await app.db.select({ id: users.id }).from(users).where(eq(users.id, pat.id));
    expect(row?.id).toBe(pat.id);
  });

  test("two tenants' own users with one address stay two people", async () => {
    const a = await signedInTenant(app);
    const b = await signedInTenant(app);
    const email = `same${crypto.randomUUID().slice(0, 6)}@example.com`;
    const inA = await createUser(app.db, a.id, { email });
    const inB = await createUser(app.db, b.id, { email, password: `${PASSWORD}-b` });
    expect(inA.id).not.toBe(inB.id);
    const tokens = await loginTokens(app, { email, tenant: a.code });
    const me = (await (await app.request("/api/auth/me", bearer(tokens.accessToken))).json()) as {
      memberships: { tenant: { id: string } }[];
    };
    expect(me.memberships.map((m) => m.tenant.id)).toEqual([a.id]);
    // A's password does not open B, and A's user cannot switch to B
    expect((await login(app, { email, tenant: b.code })).status).toBe(401);
    expect((await login(app, { email, tenant: b.code, password: `${PASSWORD}-b` })).status).toBe(200);
    const switched = await app.request(
      "/api/auth/switch",
      json({ tenant: b.code }, { authorization: `Bearer ${tokens.accessToken}` }),
    );
    expect(switched.status).toBe(404);
  });

  test("a white-label host answers alike for a member elsewhere and an unknown address", async () => {
    const a = await signedInTenant(app);
    const white = await signedInTenant(app);
    const host = await activeDomain(app.db, white.id, `wl${crypto.randomUUID().slice(0, 6)}.example.net`);
    const pat = await createSharedUser(app.db, [{ tenantId: a.id, role: "owner" }]);
    const elsewhere = await login(app, { email: pat.email }, { host });
    const unknown = await login(
      app,
      { email: `nobody${crypto.randomUUID().slice(0, 6)}@example.com` },
      { host },
    );
    expect(elsewhere.status).toBe(401);
    expect(unknown.status).toBe(401);
    const strip = async (r: Response) => {
      const { instance: _i, requestId: _r, ...rest } = (await r.json()) as Record<string, unknown>;
      return rest;
    };
    expect(await strip(elsewhere)).toEqual(await strip(unknown));
    // and on A's custom domain a token of A switches to A only
    const hostA = await activeDomain(app.db, a.id, `wa${crypto.randomUUID().slice(0, 6)}.example.net`);
    const tokens = await loginTokens(app, { email: pat.email, tenant: a.code });
    const there = await app.request(
      `http://${hostA}/api/auth/switch`,
      json({ tenant: white.code }, { authorization: `Bearer ${tokens.accessToken}`, host: hostA }),
    );
    expect(there.status).toBe(404);
  });
});
