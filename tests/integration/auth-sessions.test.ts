import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  browserOriginCheck,
  csrfTokenMatches,
  openBrowserSession,
  signInBrowser,
} from "../../src/auth/browser-sessions.ts";
import { signInWithPassword } from "../../src/auth/password-sign-in.ts";
import { SESSION_CHANNEL } from "../../src/auth/session-cache.ts";
import { openTokenSession } from "../../src/auth/session-lookup.ts";
import { callerOf, endSessions, logout } from "../../src/auth/sessions.ts";
import { systemCtx } from "../../src/context.ts";
import { AppError } from "../../src/errors.ts";
import { createTestApp, type TestApp } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { createTenant, createUser, PASSWORD } from "../helpers/identity.ts";

let t: TestDatabase;
let app: TestApp;

beforeAll(async () => {
  t = await createTestDatabase();
  app = await createTestApp({
    database: t.database,
    env: { BrowserAuth__AllowedOrigins__0: "https://app.customer.test" },
  });
});
afterAll(async () => {
  await app.close();
  await t.drop();
});

const anonymous = (tenantId: string | null) => ({
  tenantId,
  actor: { type: "anonymous" as const },
  clientIp: "10.9.0.1",
});

async function signedInUser() {
  const tenant = await createTenant(t.database.db);
  const user = await createUser(t.database.db, tenant.id);
  const pair = await signInWithPassword(app.deps, anonymous(tenant.id), {
    email: user.email,
    password: PASSWORD,
  });
  return { tenant, user, pair };
}

describe("session lookup", () => {
  test("an access token opens its token session until the session ends", async () => {
    const { tenant, user, pair } = await signedInUser();
    const open = await openTokenSession(app.deps, pair.accessToken);
    if ("refused" in open) throw new Error(open.refused);
    expect(open.kind).toBe("token");
    expect(open.identity.userId).toBe(user.id);
    await logout(app.deps, anonymous(tenant.id), { refreshToken: pair.refreshToken });
    expect(await openTokenSession(app.deps, pair.accessToken)).toEqual({ refused: "The session has ended." });
  });

  test("a malformed access token is refused as invalid", async () => {
    expect(await openTokenSession(app.deps, "not.a.token")).toEqual({ refused: "Invalid or expired token." });
  });

  test("a browser sign-in's sealed cookie opens its session; the CSRF token matches only itself", async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id);
    const signIn = await signInBrowser(app.deps, anonymous(tenant.id), {
      email: user.email,
      password: PASSWORD,
    });
    expect(signIn.passwordChangeRequired).toBe(false);
    const open = await openBrowserSession(app.deps, signIn.cookie);
    if ("refused" in open) throw new Error(open.refused);
    expect(open.kind).toBe("browser");
    expect(csrfTokenMatches(open, signIn.csrfToken)).toBe(true);
    expect(csrfTokenMatches(open, `${signIn.csrfToken}x`)).toBe(false);
    expect(csrfTokenMatches(open, undefined)).toBe(false);
    expect(csrfTokenMatches(open, "")).toBe(false);
  });

  test("a cookie value that was not sealed here is refused", async () => {
    expect(await openBrowserSession(app.deps, "forged")).toEqual({
      refused: "The session cookie is not valid here.",
    });
  });
});

describe("browserOriginCheck", () => {
  test("compares normalised origins", () => {
    const allowed = browserOriginCheck(app.deps.config);
    expect(allowed("https://APP.customer.test:443/")).toBe(true);
    expect(allowed("https://app.customer.test")).toBe(true);
    expect(allowed("http://app.customer.test")).toBe(false);
    expect(allowed("https://evil.test")).toBe(false);
  });
});

describe("callerOf", () => {
  test("a ctx without a signed-in user is refused with 401", () => {
    expect(() => callerOf(anonymous(null))).toThrow(AppError);
    expect(() => callerOf(systemCtx("test"))).toThrow(AppError);
  });
});

describe("endSessions in the caller's transaction", () => {
  test("the notice goes out at commit, and not at all on rollback", async () => {
    const heard: string[] = [];
    const stop = await t.database.listen(SESSION_CHANNEL, (payload) => heard.push(payload));
    const waitFor = async (count: number) => {
      for (let i = 0; i < 100 && heard.length < count; i++) await Bun.sleep(20);
    };
    try {
      const { user, pair } = await signedInUser();
      expect("refused" in (await openTokenSession(app.deps, pair.accessToken))).toBe(false);
      await t.database.db.transaction(async (tx) => {
        await endSessions(app.deps, { ...systemCtx("test"), tx }, { userId: user.id });
        await Bun.sleep(100);
        // not yet committed: nobody heard of it
        expect(heard.filter((p) => p.includes(user.id))).toEqual([]);
      });
      await waitFor(1);
      expect(heard.filter((p) => p.includes(user.id))).toEqual([JSON.stringify({ userId: user.id })]);

      const other = await signedInUser();
      await t.database.db
        .transaction(async (tx) => {
          await endSessions(app.deps, { ...systemCtx("test"), tx }, { userId: other.user.id });
          tx.rollback();
        })
        .catch(() => undefined);
      await Bun.sleep(200);
      expect(heard.filter((p) => p.includes(other.user.id))).toEqual([]);
    } finally {
      await stop();
    }
  });

  test("without a transaction it evicts the process's cached sessions at once", async () => {
    const { user, pair } = await signedInUser();
    const open = await openTokenSession(app.deps, pair.accessToken);
    if ("refused" in open) throw new Error(open.refused);
    expect(app.deps.sessionCache.get(`s:${open.sessionId}`)).toBeDefined();
    await endSessions(app.deps, systemCtx("test"), { userId: user.id });
    expect(app.deps.sessionCache.get(`s:${open.sessionId}`)).toBeUndefined();
  });
});
