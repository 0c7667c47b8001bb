import { describe, expect, test } from "bun:test";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import {
  bearer,
  createTenant,
  createUser,
  json,
  login,
  loginTokens,
  PASSWORD,
  readyPlatformUser,
  type Tokens,
} from "../helpers/identity.ts";

/** #16 point 8: a password change ends every session; passwords set by others; passwords about you. */
let n = 0;
const peer = () => `198.51.100.${++n}`;
const on = (host: string, path: string) => `http://${host}${path}`;
const NEW_PASSWORD = "quiet-orchard-lantern-42";

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

const change = (accessToken: string, body: { currentPassword: string; newPassword: string }) =>
  app.request("/api/auth/password", json(body, { authorization: `Bearer ${accessToken}` }), peer());

describe("a password change ends every session", () => {
  test("the changing token session included: its tokens die, the answer's fresh pair works", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const mine = await loginTokens(app, { email: user.email, tenant: tenant.code });
    const other = await loginTokens(app, { email: user.email, tenant: tenant.code });
    const changed = await change(mine.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD });
    expect(changed.status).toBe(200);
    const fresh = (await changed.json()) as Tokens;
    for (const old of [mine, other]) {
      expect((await app.request("/api/auth/me", bearer(old.accessToken))).status).toBe(401);
      expect((await app.request("/api/auth/refresh", json({ refreshToken: old.refreshToken }))).status).toBe(
        401,
      );
    }
    expect((await app.request("/api/auth/me", bearer(fresh.accessToken))).status).toBe(200);
    expect((await app.request("/api/auth/refresh", json({ refreshToken: fresh.refreshToken }))).status).toBe(
      200,
    );
  });

  test("a browser session: 204, the cookie is cleared and the session ends; the page signs in again", async () => {
    const admin = await readyPlatformUser(t.database.db);
    const origin = "https://app.customer.test";
    const browserLogin = (password: string) =>
      app.request(on("api.plinth.test", "/api/auth/browser/login"), {
        method: "POST",
        headers: { "content-type": "application/json", origin },
        body: JSON.stringify({ email: admin.email, password }),
      });
    const signIn = await browserLogin(PASSWORD);
    expect(signIn.status).toBe(200);
    const { csrfToken } = (await signIn.json()) as { csrfToken: string };
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    const headers = { cookie, origin, "x-csrf-token": csrfToken, "content-type": "application/json" };
    const token = await loginTokens(app, { email: admin.email });
    const changed = await app.request(on("api.plinth.test", "/api/auth/password"), {
      method: "POST",
      headers,
      body: JSON.stringify({ currentPassword: PASSWORD, newPassword: NEW_PASSWORD }),
    });
    expect(changed.status).toBe(204);
    expect(changed.headers.get("set-cookie")).toMatch(/^__Host-plinth_session=;.*Max-Age=0/);
    expect((await app.request(on("api.plinth.test", "/api/auth/me"), { headers })).status).toBe(401);
    expect((await app.request("/api/auth/me", bearer(token.accessToken))).status).toBe(401);
    expect((await browserLogin(NEW_PASSWORD)).status).toBe(200);
  });
});

describe("a password someone else set must be changed at first sign-in", () => {
  test("a user created by a platform admin and one added by an owner", async () => {
    const tenant = await createTenant(t.database.db);
    const admin = await readyPlatformUser(t.database.db);
    const adminTokens = await loginTokens(app, { email: admin.email, password: PASSWORD });
    const owner = await createUser(t.database.db, tenant.id, { role: "owner" });
    const ownerTokens = await loginTokens(app, { email: owner.email, tenant: tenant.code });
    const byAdmin = await app.request(
      `/api/admin/tenants/${tenant.id}/users`,
      json(
        { email: "by-admin@example.com", name: "By Admin", password: PASSWORD, role: "owner" },
        { authorization: `Bearer ${adminTokens.accessToken}` },
      ),
    );
    expect(byAdmin.status).toBe(201);
    const byOwner = await app.request(
      "/api/tenant/users",
      json(
        { email: "by-owner@example.com", name: "By Owner", password: PASSWORD },
        { authorization: `Bearer ${ownerTokens.accessToken}` },
      ),
    );
    expect(byOwner.status).toBe(201);
    for (const email of ["by-admin@example.com", "by-owner@example.com"]) {
      const first = await loginTokens(app, { email, tenant: tenant.code });
      expect(first.passwordChangeRequired).toBe(true);
      const refused = await app.request("/api/tenant/users", bearer(first.accessToken));
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { code: string }).code).toBe("password_change_required");
      const changed = await change(first.accessToken, {
        currentPassword: PASSWORD,
        newPassword: NEW_PASSWORD,
      });
      expect(changed.status).toBe(200);
      expect(((await changed.json()) as Tokens).passwordChangeRequired).toBe(false);
    }
  });
});

describe("passwords built from the e-mail address or name are refused", () => {
  test("as the new user's password and as a changed password", async () => {
    const tenant = await createTenant(t.database.db);
    const owner = await createUser(t.database.db, tenant.id, {
      role: "owner",
      email: `owner${++n}@acme.test`,
    });
    const ownerTokens = await loginTokens(app, { email: owner.email, tenant: tenant.code });
    const local = owner.email.split("@")[0] ?? "";
    for (const password of [`${local}acme123`, `Acme-${local}-2026!`, `acme.test.${local}`]) {
      const answer = await change(ownerTokens.accessToken, {
        currentPassword: PASSWORD,
        newPassword: password,
      });
      expect(answer.status).toBe(400);
      const problem = (await answer.json()) as { errors: { path: string; message: string }[] };
      expect(problem.errors).toEqual([
        { path: "newPassword", message: expect.stringContaining("e-mail address or name") },
      ]);
      expect(JSON.stringify(problem)).not.toContain(password);
    }
    for (const [email, name, password] of [
      ["admin@example.com", "Site Admin", "adminexample1"],
      ["jane.doe@example.com", "Jane Doe", "JaneDoe!20262026"],
      ["ops@example.com", "Priya Raman", "priya-raman-1999"],
    ] as const) {
      const answer = await app.request(
        "/api/tenant/users",
        json({ email, name, password }, { authorization: `Bearer ${ownerTokens.accessToken}` }),
      );
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { errors: { path: string }[] }).errors.map((e) => e.path)).toEqual([
        "password",
      ]);
    }
    // a password that is not about the account is still fine
    expect(
      (await change(ownerTokens.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD }))
        .status,
    ).toBe(200);
    expect(
      (
        await login(
          app,
          { email: owner.email, tenant: tenant.code, password: NEW_PASSWORD },
          { peer: peer() },
        )
      ).status,
    ).toBe(200);
  });
});
