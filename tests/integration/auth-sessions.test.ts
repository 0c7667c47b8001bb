import { describe, expect, test } from "bun:test";
import {
  browserOriginCheck,
  csrfTokenMatches,
  openBrowserSession,
  signInBrowser,
} from "../../src/auth/browser-sessions.ts";
import { SESSION_CHANNEL } from "../../src/auth/session-cache.ts";
import { openTokenSession } from "../../src/auth/session-lookup.ts";
import { callerOf, endSessions, logout } from "../../src/auth/sessions.ts";
import { systemCtx } from "../../src/context.ts";
import { AppError } from "../../src/errors.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createTenant, createUser, PASSWORD, signedInTenant } from "../helpers/identity.ts";

const app = useTestApp({
  settings: relaxedLimits,
  env: { BrowserAuth__AllowedOrigins__0: "https://app.customer.test" },
});
const t = app.testDatabase;

const anonymous = (tenantId: string | null) => ({
  tenantId,
  actor: { type: "anonymous" as const },
  clientIp: "10.9.0.1",
});

describe("session lookup", () => {
  test("an access token opens its token session until the session ends", async () => {
    const tenant = await signedInTenant(app);
    const user = tenant.member;
    const open = await openTokenSession(app.deps, user.accessToken);
    if ("refused" in open) throw new Error(open.refused);
    expect(open.kind).toBe("token");
    expect(open.identity.userId).toBe(user.id);
    await logout(app.deps, anonymous(tenant.id), { refreshToken: user.refreshToken });
    expect(await openTokenSession(app.deps, user.accessToken)).toEqual({ refused: "The session has ended." });
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
    if ("mfaRequired" in signIn) throw new Error("no second factor was enrolled");
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
      const user = (await signedInTenant(app)).member;
      expect("refused" in (await openTokenSession(app.deps, user.accessToken))).toBe(false);
      await t.database.db.transaction(async (tx) => {
        await endSessions(app.deps, { ...systemCtx("test"), tx }, { userId: user.id });
        await Bun.sleep(100);
        // not yet committed: nobody heard of it
        expect(heard.filter((p) => p.includes(user.id))).toEqual([]);
      });
      await waitFor(1);
      expect(heard.filter((p) => p.includes(user.id))).toEqual([JSON.stringify({ userId: user.id })]);

      const other = (await signedInTenant(app)).member;
      await t.database.db
        .transaction(async (tx) => {
          await endSessions(app.deps, { ...systemCtx("test"), tx }, { userId: other.id });
          tx.rollback();
        })
        .catch(() => undefined);
      await Bun.sleep(200);
      expect(heard.filter((p) => p.includes(other.id))).toEqual([]);
    } finally {
      await stop();
    }
  });

  test("without a transaction it evicts the process's cached sessions at once", async () => {
    const user = (await signedInTenant(app)).member;
    const open = await openTokenSession(app.deps, user.accessToken);
    if ("refused" in open) throw new Error(open.refused);
    expect(app.deps.sessionCache.get(`s:${open.sessionId}`)).toBeDefined();
    await endSessions(app.deps, systemCtx("test"), { userId: user.id });
    expect(app.deps.sessionCache.get(`s:${open.sessionId}`)).toBeUndefined();
  });
});
