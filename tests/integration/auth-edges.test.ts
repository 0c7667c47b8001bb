import { describe, expect, test } from "bun:test";
import { createTestApp, relaxedLimits, settingsEnv, useTestApp } from "../helpers/app.ts";
import {
  activeDomain,
  bearer,
  createPlatformAdmin,
  createTenant,
  createUser,
  json,
  login,
  loginTokens,
  PASSWORD,
  type Tokens,
} from "../helpers/identity.ts";

/** Edges of sign-in found in review: unknown tenant codes, cross-tenant refresh, input checks. */
let n = 0;
const peer = () => `198.51.100.${++n}`;
const on = (host: string, path: string) => `http://${host}${path}`;

const app = useTestApp({
  settings: relaxedLimits,
  env: {
    AllowedHosts__0: "api.plinth.test",
    AllowedHosts__1: "localhost",
    Tenancy__Resolution__PlatformHost: "api.plinth.test",
    BrowserAuth__AllowedOrigins__0: "https://app.customer.test",
  },
});
const t = app.testDatabase;

describe("an unknown tenant code cannot be told apart from a known one", () => {
  test("sign-in with an unknown code in the header, the query or the body: the same 401 as a wrong password", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const body = (extra: Record<string, string> = {}) =>
      JSON.stringify({ email: user.email, password: "wrong-password-123", ...extra });
    const post = (path: string, headers: Record<string, string>, payload: string) =>
      app.request(
        path,
        { method: "POST", headers: { "content-type": "application/json", ...headers }, body: payload },
        peer(),
      );
    const answers = [
      await post("/api/auth/login", {}, body({ tenant: tenant.code })), // known tenant, wrong password
      await post("/api/auth/login", { "x-tenant": "no-such-tenant" }, body()),
      await post("/api/auth/login?tenant=no-such-tenant", {}, body()),
      await post("/api/auth/login", {}, body({ tenant: "no-such-tenant" })),
      // a body code that contradicts the one in the header
      await post("/api/auth/login", { "x-tenant": tenant.code }, body({ tenant: "other-code" })),
    ];
    const shapes = new Set<string>();
    for (const answer of answers) {
      expect(answer.status).toBe(401);
      shapes.add(JSON.stringify({ ...((await answer.json()) as object), requestId: undefined }));
    }
    expect(shapes.size).toBe(1);
    // the right password still works with the real code
    expect((await login(app, { email: user.email, tenant: tenant.code }, { peer: peer() })).status).toBe(200);
  });

  test("SMS send with an unknown code answers 202 like an unknown number", async () => {
    const cases: { path: string; headers: Record<string, string>; body: Record<string, string> }[] = [
      { path: "/api/auth/sms/send", headers: { "x-tenant": "no-such-tenant" }, body: {} },
      { path: "/api/auth/sms/send", headers: {}, body: { tenant: "no-such-tenant" } },
    ];
    for (const init of cases) {
      const response = await app.request(
        init.path,
        json({ phone: "+14155550100", ...init.body }, init.headers),
        peer(),
      );
      expect(response.status).toBe(202);
    }
  });

  test("an authenticated route under an unknown code finds nothing (404), as under another tenant", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const tokens = await loginTokens(app, { email: user.email, tenant: tenant.code });
    const me = await app.request(
      "/api/auth/me",
      bearer(tokens.accessToken, { "x-tenant": "no-such-tenant" }),
    );
    expect(me.status).toBe(404);
  });
});

describe("TenantCodePaths", () => {
  test("a tenant code in the body obeys it like X-Tenant does", async () => {
    const narrow = await createTestApp({
      database: t.database,
      env: { ...settingsEnv(relaxedLimits), Tenancy__Resolution__TenantCodePaths__0: "/t/" },
    });
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const inBody = await narrow.request(
      "/api/auth/login",
      json({ email: user.email, password: PASSWORD, tenant: tenant.code }),
      peer(),
    );
    expect(inBody.status).toBe(400);
    const inHeader = await narrow.request(
      "/api/auth/login",
      json({ email: user.email, password: PASSWORD }, { "x-tenant": tenant.code }),
      peer(),
    );
    expect(inHeader.status).toBe(400);
    // and with the default paths both work
    expect((await login(app, { email: user.email, tenant: tenant.code }, { peer: peer() })).status).toBe(200);
  });
});

describe("refresh tokens stay in their tenant", () => {
  test("tenant A's refresh token is refused on tenant B's host and stays usable on its own", async () => {
    const a = await createTenant(t.database.db);
    const b = await createTenant(t.database.db);
    await activeDomain(t.database.db, a.id, `app.${a.code}.test`);
    await activeDomain(t.database.db, b.id, `app.${b.code}.test`);
    const user = await createUser(t.database.db, a.id);
    const tokens = await loginTokens(app, { email: user.email, tenant: a.code });
    const onB = await app.request(
      on(`app.${b.code}.test`, "/api/auth/refresh"),
      json({ refreshToken: tokens.refreshToken }),
    );
    expect(onB.status).toBe(401);
    // logging out there does nothing either
    const logoutOnB = await app.request(
      on(`app.${b.code}.test`, "/api/auth/logout"),
      json({ refreshToken: tokens.refreshToken }),
    );
    expect(logoutOnB.status).toBe(204);
    // the token was neither spent nor its session revoked
    const onA = await app.request(
      on(`app.${a.code}.test`, "/api/auth/refresh"),
      json({ refreshToken: tokens.refreshToken }),
    );
    expect(onA.status).toBe(200);
    const fresh = (await onA.json()) as Tokens;
    // on the platform host (no tenant in the request) it works as before
    expect((await app.request("/api/auth/refresh", json({ refreshToken: fresh.refreshToken }))).status).toBe(
      200,
    );
  });
});

describe("input checks", () => {
  test("an invalid phone number for a new user is a 400 naming the field, not a 500", async () => {
    const tenant = await createTenant(t.database.db);
    const owner = await createUser(t.database.db, tenant.id, { role: "owner" });
    const tokens = await loginTokens(app, { email: owner.email, tenant: tenant.code });
    const response = await app.request(
      "/api/tenant/users",
      json(
        { email: `new${++n}@example.com`, name: "New", password: PASSWORD, phone: "12345" },
        { authorization: `Bearer ${tokens.accessToken}` },
      ),
    );
    expect(response.status).toBe(400);
    const problem = (await response.json()) as { code: string; errors: { path: string }[] };
    expect(problem.code).toBe("validation_failed");
    expect(problem.errors.map((e) => e.path)).toContain("phone");
  });
});

describe("a user who must change the password", () => {
  test("can still sign out of the browser", async () => {
    const admin = await createPlatformAdmin(t.database.db);
    const origin = "https://app.customer.test";
    const signIn = await app.request(on("api.plinth.test", "/api/auth/browser/login"), {
      method: "POST",
      headers: { "content-type": "application/json", origin },
      body: JSON.stringify({ email: admin.email, password: PASSWORD }),
    });
    expect(signIn.status).toBe(200);
    const { csrfToken, passwordChangeRequired } = (await signIn.json()) as {
      csrfToken: string;
      passwordChangeRequired: boolean;
    };
    expect(passwordChangeRequired).toBe(true);
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    const headers = { cookie, origin, "x-csrf-token": csrfToken };
    // anything else is still refused
    const me = await app.request(on("api.plinth.test", "/api/auth/me"), { headers });
    expect(me.status).toBe(403);
    const out = await app.request(on("api.plinth.test", "/api/auth/browser/logout"), {
      method: "POST",
      headers,
    });
    expect(out.status).toBe(204);
    expect((await app.request(on("api.plinth.test", "/api/auth/me"), { headers })).status).toBe(401);
  });
});
