import { beforeAll, describe, expect, test } from "bun:test";
import { and, eq } from "drizzle-orm";
import { opaqueToken, tokenHash } from "../../src/auth/opaque-tokens.ts";
import { refreshTokens, sessions, users } from "../../src/db/schema/index.ts";
import { createTestApp, relaxedLimits, settingsEnv, useTestApp } from "../helpers/app.ts";
import {
  activeDomain,
  bearer,
  createTenant,
  createUser,
  json,
  login,
  loginTokens,
  type SignedInTenant,
  setDomainStatus,
  signedInPlatformAdmin,
  signedInTenant,
} from "../helpers/identity.ts";

let tenantA: SignedInTenant;
let tenantB: SignedInTenant;
let ownerA: string;
let ownerB: string;
let memberB: { id: string; email: string };
let admin: string;
let adminEmail: string;

const app = useTestApp({
  settings: relaxedLimits,
  env: {
    AllowedHosts__0: "api.plinth.test",
    AllowedHosts__1: "localhost",
    Tenancy__Resolution__PlatformHost: "api.plinth.test",
    Tenancy__Resolution__TrustedProxies__0: "10.0.0.0/8",
    Cors__Origins__0: "https://app.customer.test",
    Cors__Methods__0: "GET",
    Cors__Methods__1: "POST",
    Cors__Headers__0: "content-type",
    Cors__Headers__1: "authorization",
    Cors__AllowCredentials: "true",
    BrowserAuth__AllowedOrigins__0: "https://app.customer.test",
  },
});
const t = app.testDatabase;
beforeAll(async () => {
  tenantA = await signedInTenant(app);
  tenantB = await signedInTenant(app);
  ownerA = tenantA.owner.accessToken;
  ownerB = tenantB.owner.accessToken;
  memberB = tenantB.member;
  await activeDomain(t.database.db, tenantA.id, "app.tenant-a.test");
  await activeDomain(t.database.db, tenantB.id, "app.tenant-b.test");
  const platformAdmin = await signedInPlatformAdmin(app);
  adminEmail = platformAdmin.email;
  admin = platformAdmin.accessToken;
});

const on = (host: string, path: string) => `http://${host}${path}`;

describe("tenant isolation", () => {
  test("each owner lists only their own tenant's users", async () => {
    const listA = (await (await app.request("/api/tenant/users", bearer(ownerA))).json()) as {
      items: { id: string }[];
    };
    const listB = (await (await app.request("/api/tenant/users", bearer(ownerB))).json()) as {
      items: { id: string }[];
    };
    expect(listA.items.map((u) => u.id)).not.toContain(memberB.id);
    expect(listB.items.map((u) => u.id)).toContain(memberB.id);
  });

  test("tenant A's owner gets 404 (not 403, not data) for tenant B's user on every user route", async () => {
    const disable = await app.request(`/api/tenant/users/${memberB.id}/disable`, {
      method: "POST",
      ...bearer(ownerA),
    });
    expect(disable.status).toBe(404);
    const remove = await app.request(`/api/tenant/users/${memberB.id}`, {
      method: "DELETE",
      ...bearer(ownerA),
    });
    expect(remove.status).toBe(404);
    const [still] = await t.database.db
      .select({ status: users.status })
      .from(users)
      .where(eq(users.id, memberB.id));
    expect(still?.status).toBe("Active");
  });

  test("tenant A's token on tenant B's host is 404; on its own host it works", async () => {
    const other = await app.request(on("app.tenant-b.test", "/api/tenant/users"), bearer(ownerA));
    expect(other.status).toBe(404);
    expect(await other.text()).not.toContain(memberB.id);
    expect((await app.request(on("app.tenant-b.test", "/api/auth/me"), bearer(ownerA))).status).toBe(404);
    expect((await app.request(on("app.tenant-a.test", "/api/tenant/users"), bearer(ownerA))).status).toBe(
      200,
    );
  });

  test("a tenant user signs in on the tenant's own host without a code; not on another tenant's host", async () => {
    const user = await createUser(t.database.db, tenantA.id);
    expect((await login(app, { email: user.email }, { host: "app.tenant-a.test" })).status).toBe(200);
    expect((await login(app, { email: user.email }, { host: "app.tenant-b.test" })).status).toBe(401);
    expect(
      (await login(app, { email: user.email, tenant: tenantB.code }, { host: "app.tenant-a.test" })).status,
    ).toBe(401);
  });

  test("members are not owners: 403 on user management", async () => {
    const member = await createUser(t.database.db, tenantA.id, { role: "member" });
    const token = (await loginTokens(app, { email: member.email, tenant: tenantA.code })).accessToken;
    expect((await app.request("/api/tenant/users", bearer(token))).status).toBe(403);
  });

  test("disabling a user ends their sessions at once", async () => {
    const member = await createUser(t.database.db, tenantA.id);
    const token = (await loginTokens(app, { email: member.email, tenant: tenantA.code })).accessToken;
    expect((await app.request("/api/auth/me", bearer(token))).status).toBe(200);
    expect(
      (await app.request(`/api/tenant/users/${member.id}/disable`, { method: "POST", ...bearer(ownerA) }))
        .status,
    ).toBe(204);
    expect((await app.request("/api/auth/me", bearer(token))).status).toBe(401);
  });

  test("the last owner cannot be removed or disabled", async () => {
    const tenant = await createTenant(t.database.db);
    const owner = await createUser(t.database.db, tenant.id, { role: "owner" });
    const token = (await loginTokens(app, { email: owner.email, tenant: tenant.code })).accessToken;
    expect(
      (await app.request(`/api/tenant/users/${owner.id}`, { method: "DELETE", ...bearer(token) })).status,
    ).toBe(409);
  });
});

describe("platform administrators and tenants", () => {
  test("a platform administrator creates a tenant's first owner; unknown tenant is 404; duplicates 409", async () => {
    const tenant = await createTenant(t.database.db);
    const body = {
      email: "first-owner@example.com",
      name: "Owner",
      password: "owner-password-123",
      role: "owner",
    };
    const created = await app.request(
      `/api/admin/tenants/${tenant.id}/users`,
      json(body, { authorization: `Bearer ${admin}` }),
    );
    expect(created.status).toBe(201);
    expect(((await created.json()) as { id: string }).id).toBeString();
    const again = await app.request(
      `/api/admin/tenants/${tenant.id}/users`,
      json(body, { authorization: `Bearer ${admin}` }),
    );
    expect(again.status).toBe(409);
    const missing = await app.request(
      `/api/admin/tenants/${crypto.randomUUID()}/users`,
      json(body, { authorization: `Bearer ${admin}` }),
    );
    expect(missing.status).toBe(404);
    expect(
      (await login(app, { email: body.email, password: body.password, tenant: tenant.code })).status,
    ).toBe(200);
    // a guessable password is refused with 400 naming the field; nothing is created
    const weak = await app.request(
      `/api/admin/tenants/${tenant.id}/users`,
      json(
        { ...body, email: "second@example.com", password: "iloveyou1234" },
        { authorization: `Bearer ${admin}` },
      ),
    );
    expect(weak.status).toBe(400);
    const problem = (await weak.json()) as { errors: { path: string }[] };
    expect(problem.errors.map((e) => e.path)).toEqual(["password"]);
    expect(JSON.stringify(problem)).not.toContain("iloveyou1234");
  });

  test("tenant owners get 403 on admin routes; administrators act on tenants only through /api/admin", async () => {
    expect((await app.request("/api/admin/tenants", bearer(ownerA))).status).toBe(403);
    expect(
      (
        await app.request(
          `/api/admin/tenants/${tenantA.id}/users`,
          json({}, { authorization: `Bearer ${ownerA}` }),
        )
      ).status,
    ).toBe(403);
    expect((await app.request("/api/tenant/users", bearer(admin))).status).toBe(403);
  });

  test("a platform administrator signs in on the unconfigured local host without a tenant", async () => {
    // Development with no AllowedHosts: localhost, 127.0.0.1 and [::1] on any port, nothing else
    const local = await createTestApp({
      database: t.database,
      env: settingsEnv(relaxedLimits),
    });
    for (const host of ["localhost:3000", "127.0.0.1:8080", "[::1]:9000"]) {
      const response = await login(local, { email: adminEmail }, { host });
      expect(response.status).toBe(200);
    }
    expect((await login(local, { email: adminEmail }, { host: "example.com" })).status).toBe(400);
  });
});

describe("hosts", () => {
  test("an unknown Host is 400 host_not_allowed; health stays reachable by any host", async () => {
    const response = await app.request(on("evil.test", "/api/auth/me"));
    expect(response.status).toBe(400);
    expect(((await response.json()) as { code: string }).code).toBe("host_not_allowed");
    expect((await app.request(on("10.1.2.3:8080", "/api/health"))).status).toBe(200);
  });

  test("hosts match exactly, case-insensitively, without the port; no wildcard", async () => {
    expect((await app.request(on("API.PLINTH.TEST:443", "/.well-known/jwks.json"))).status).toBe(200);
    expect((await app.request(on("x.api.plinth.test", "/.well-known/jwks.json"))).status).toBe(400);
  });

  test("a Pending or Failed domain is not served", async () => {
    await activeDomain(t.database.db, tenantA.id, "pending.tenant-a.test");
    await setDomainStatus(t.database.db, "pending.tenant-a.test", "Pending");
    expect((await app.request(on("pending.tenant-a.test", "/.well-known/jwks.json"))).status).toBe(400);
  });

  test("X-Forwarded-Host counts only from a trusted proxy", async () => {
    const spoofed = await app.request(
      on("api.plinth.test", "/api/tenant/users"),
      { headers: { authorization: `Bearer ${ownerA}`, "x-forwarded-host": "app.tenant-b.test" } },
      "203.0.113.9",
    );
    expect(spoofed.status).toBe(200); // untrusted peer: the header changes nothing
    const proxied = await app.request(
      on("api.plinth.test", "/api/tenant/users"),
      { headers: { authorization: `Bearer ${ownerA}`, "x-forwarded-host": "app.tenant-b.test" } },
      "10.1.1.1",
    );
    expect(proxied.status).toBe(404); // trusted proxy: the request is for tenant B's host
    // a proxy that appends: the client's own entry in front of the proxy's is not believed
    const appended = await app.request(
      on("api.plinth.test", "/api/tenant/users"),
      {
        headers: {
          authorization: `Bearer ${ownerA}`,
          "x-forwarded-host": "app.tenant-b.test, app.tenant-a.test",
        },
      },
      "10.1.1.1",
    );
    expect(appended.status).toBe(200);
  });

  test("a tenant code is accepted only on the configured paths", async () => {
    const refused = await app.request("/api/tenant/users", {
      headers: { authorization: `Bearer ${ownerA}`, "x-tenant": tenantA.code },
    });
    expect(refused.status).toBe(400);
    const user = await createUser(t.database.db, tenantA.id);
    const accepted = await app.request("/api/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json", "x-tenant": tenantA.code },
      body: JSON.stringify({ email: user.email, password: "a-long-test-password-1" }),
    });
    expect(accepted.status).toBe(200);
  });

  test("a spoofed X-Forwarded-For from an untrusted peer does not escape the per-IP window", async () => {
    const strict = await createTestApp({
      database: t.database,
      env: { ...settingsEnv(relaxedLimits), Authentication__Password__IpAttemptLimit: "3" },
    });
    const tenant = await createTenant(t.database.db);
    const attempt = (i: number, peer: string) =>
      strict.request(
        "/api/auth/login",
        {
          method: "POST",
          headers: { "content-type": "application/json", "x-forwarded-for": `192.0.2.${i}` },
          body: JSON.stringify({
            email: `victim${i}@example.com`,
            password: "guess-guess-guess",
            tenant: tenant.code,
          }),
        },
        peer,
      );
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await attempt(i, "198.51.100.7")).status);
    expect(statuses).toEqual([401, 401, 401, 429, 429]); // counted on the real peer, whatever the header says
    expect((await attempt(9, "198.51.100.8")).status).toBe(401); // another client is not affected
  });
});

describe("CORS", () => {
  test("a listed origin gets CORS headers with credentials; preflight answered", async () => {
    const preflight = await app.request(on("api.plinth.test", "/api/auth/login"), {
      method: "OPTIONS",
      headers: { origin: "https://app.customer.test", "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("https://app.customer.test");
    expect(preflight.headers.get("access-control-allow-credentials")).toBe("true");
    expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
  });

  test("an unlisted origin gets no CORS headers, preflight or not", async () => {
    const preflight = await app.request(on("api.plinth.test", "/api/auth/login"), {
      method: "OPTIONS",
      headers: { origin: "https://evil.test", "access-control-request-method": "POST" },
    });
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    const get = await app.request(on("api.plinth.test", "/.well-known/jwks.json"), {
      headers: { origin: "https://evil.test" },
    });
    expect(get.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("browser authentication", () => {
  async function browserLogin(origin: string | undefined, email: string, tenant: string) {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (origin) headers.origin = origin;
    return app.request(on("api.plinth.test", "/api/auth/browser/login"), {
      method: "POST",
      headers,
      body: JSON.stringify({ email, password: "a-long-test-password-1", tenant }),
    });
  }

  test("refused from an unlisted origin or without one", async () => {
    const user = await createUser(t.database.db, tenantA.id);
    expect((await browserLogin("https://evil.test", user.email, tenantA.code)).status).toBe(403);
    expect((await browserLogin(undefined, user.email, tenantA.code)).status).toBe(403);
  });

  test("sets an HttpOnly, Secure, SameSite __Host- cookie; CSRF guards state changes", async () => {
    const user = await createUser(t.database.db, tenantA.id);
    const response = await browserLogin("https://app.customer.test", user.email, tenantA.code);
    expect(response.status).toBe(200);
    const setCookie = response.headers.get("set-cookie") ?? "";
    expect(setCookie).toStartWith("__Host-plinth_session=");
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("Secure");
    expect(setCookie).toContain("SameSite=Strict");
    expect(setCookie).toContain("Path=/");
    const { csrfToken } = (await response.json()) as { csrfToken: string };
    const cookie = setCookie.split(";")[0] ?? "";
    const origin = "https://app.customer.test";
    const me = await app.request(on("api.plinth.test", "/api/auth/me"), { headers: { cookie, origin } });
    expect(me.status).toBe(200);
    // the cookie from another origin is refused
    expect(
      (
        await app.request(on("api.plinth.test", "/api/auth/me"), {
          headers: { cookie, origin: "https://evil.test" },
        })
      ).status,
    ).toBe(403);
    // a tampered cookie does not open
    expect(
      (await app.request(on("api.plinth.test", "/api/auth/me"), { headers: { cookie: `${cookie}x` } }))
        .status,
    ).toBe(401);
    const logout = (headers: Record<string, string>) =>
      app.request(on("api.plinth.test", "/api/auth/browser/logout"), {
        method: "POST",
        headers: { cookie, origin, ...headers },
      });
    expect((await logout({})).status).toBe(403); // no CSRF token
    expect((await logout({ "x-csrf-token": "wrong" })).status).toBe(403);
    const done = await logout({ "x-csrf-token": csrfToken });
    expect(done.status).toBe(204);
    expect(done.headers.get("set-cookie")).toContain("Max-Age=0");
    expect(
      (await app.request(on("api.plinth.test", "/api/auth/me"), { headers: { cookie, origin } })).status,
    ).toBe(401);
  });

  test("a password change in a browser session answers 204 without tokens; the cookie session ends", async () => {
    const user = await createUser(t.database.db, tenantA.id);
    const origin = "https://app.customer.test";
    const response = await browserLogin(origin, user.email, tenantA.code);
    const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    const { csrfToken } = (await response.json()) as { csrfToken: string };
    const changed = await app.request(on("api.plinth.test", "/api/auth/password"), {
      method: "POST",
      headers: { cookie, origin, "x-csrf-token": csrfToken, "content-type": "application/json" },
      body: JSON.stringify({
        currentPassword: "a-long-test-password-1",
        newPassword: "a-brand-new-password-3",
      }),
    });
    expect(changed.status).toBe(204);
    expect(await changed.text()).toBe("");
    // every session ends with the password that opened it, this one included: the cookie is cleared
    expect(changed.headers.get("set-cookie")).toContain("Max-Age=0");
    expect(
      (await app.request(on("api.plinth.test", "/api/auth/me"), { headers: { cookie, origin } })).status,
    ).toBe(401);
    // a refresh token attached to a browser session (as the old answer handed out) is refused
    const [session] = await t.database.db
      .select({ id: sessions.id, expiresAt: sessions.expiresAt })
      .from(sessions)
      .where(and(eq(sessions.userId, user.id), eq(sessions.kind, "browser")));
    if (!session) throw new Error("no browser session");
    const refreshToken = opaqueToken();
    await t.database.db
      .insert(refreshTokens)
      .values({ sessionId: session.id, tokenHash: tokenHash(refreshToken), expiresAt: session.expiresAt });
    expect(
      (await app.request(on("api.plinth.test", "/api/auth/refresh"), json({ refreshToken }))).status,
    ).toBe(401);
  });
});
