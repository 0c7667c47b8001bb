import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import type { Page } from "playwright-core";
import { updateFeatureOverride } from "../../src/billing/update-feature-override.ts";
import { systemCtx } from "../../src/context.ts";
import {
  auditEvents,
  ssoConnections,
  tenantEmailDomains,
  tenantMemberships,
  users,
} from "../../src/db/schema/index.ts";
import { writeTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { type OidcPeer, startOidcPeer } from "../fixtures/oidc-provider.ts";
import { json, newMasterKey, type SignedInTenant, signedInTenant } from "../helpers/identity.ts";
import { useSsoStage } from "../helpers/sso-stage.ts";

/**
 * OIDC single sign-on end to end: a real OpenID provider (oidc-provider, run by the test), the
 * browser leg in Chromium, discovery by a verified domain, just-in-time provisioning and the code
 * exchange (docs/sso.md).
 */

let peer: OidcPeer;
const masterKey = newMasterKey();
const stage = useSsoStage({
  "Security:TenantSecrets:KeyId": "k1",
  "Security:TenantSecrets:MasterKey": masterKey,
  // the test's provider listens on the loopback address
  "Sso:AllowPrivateProviders": "true",
});
const { t, appOrigin } = stage;
let tenant: SignedInTenant;
let other: SignedInTenant;

beforeAll(async () => {
  peer = await startOidcPeer({ redirectUri: `${stage.base()}/api/auth/sso/oidc/callback` });
  tenant = await signedInTenant(t, { plan: "enterprise" });
  other = await signedInTenant(t, { plan: "enterprise" });
}, 60_000);
afterAll(() => peer?.stop());

// A domain no other test uses. The x: eight hex digits alone may spell an IP address (0a7a3a72 is
// 10.122.58.114), which the hostname rules refuse as a wildcard-DNS name, one domain in ~80
const uniqueDomain = () => `corp-${crypto.randomUUID().slice(0, 8)}x.example`;

/** Tenant `tenantId` holds `domain` verified and an active OIDC connection to the test provider. */
async function ssoTenant(
  tenantId: string,
  domain: string,
  extra: Partial<typeof ssoConnections.$inferInsert> = {},
) {
  const db = t.db;
  await db
    .insert(tenantEmailDomains)
    .values({ tenantId, domain, status: "verified", verificationToken: "x" });
  const keyring = t.deps.tenantSecretKeyring;
  if (!keyring) throw new Error("no keyring");
  const [connection] = await db
    .insert(ssoConnections)
    .values({
      tenantId,
      type: "oidc",
      issuer: peer.issuer,
      clientId: peer.clientId,
      clientSecretName: "sso.test.client_secret",
      groupRoles: { "plinth-admins": "admin" },
      ...extra,
    })
    .returning();
  await writeTenantSecret(db, keyring, tenantId, {
    name: "sso.test.client_secret",
    value: peer.clientSecret,
    now: new Date(),
  });
  if (!connection) throw new Error("no connection");
  return connection;
}

/**
 * In `page` (on the API's origin, as an app or the console there), a POST the browser itself makes:
 * it receives the sign-in's browser-binding cookie. Answers the body.
 */
async function postInBrowser(page: Page, path: string, body: unknown, headers: Record<string, string> = {}) {
  await page.goto(`${stage.base()}/api/health`);
  return page.evaluate(
    async ([path, body, headers]) => {
      const res = await fetch(path, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
      return (await res.json()) as { redirectUrl: string };
    },
    [path, body, headers] as const,
  );
}

/** At the provider: its login form, submitted. */
async function loginAtProvider(page: Page, login: string) {
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', "any");
  await page.click('button[type="submit"]');
}

/** The browser leg: discover in the browser, the provider, back through the callback to `returnTo`. */
async function signInAtProvider(email: string, login: string): Promise<URL> {
  const context = await stage.browser().newContext();
  try {
    const page = await context.newPage();
    const { redirectUrl } = await postInBrowser(page, "/api/auth/sso/discover", {
      email,
      returnTo: `${appOrigin()}/done`,
    });
    await page.goto(redirectUrl);
    await page.fill('input[name="login"]', login);
    await page.fill('input[name="password"]', "any");
    await Promise.all([
      page.waitForURL((url) => url.origin === appOrigin()),
      page.click('button[type="submit"]'),
    ]);
    return new URL(page.url());
  } finally {
    await context.close();
  }
}

const discover = (email: string, returnTo?: string) =>
  t.request("/api/auth/sso/discover", json({ email, ...(returnTo ? { returnTo } : {}) }));

describe("OIDC sign-in", () => {
  test("an address of a verified domain signs in at the provider, is provisioned with its mapped role, and exchanges the code once", async () => {
    const domain = uniqueDomain();
    await ssoTenant(tenant.id, domain);
    const email = `ada@${domain}`;
    peer.users.set(email, { name: "Ada Lovelace", groups: ["plinth-admins", "other"] });
    const res = await discover(email, `${appOrigin()}/done`);
    expect(res.status).toBe(200);
    const { redirectUrl } = (await res.json()) as { redirectUrl: string };
    const authorize = new URL(redirectUrl);
    expect(authorize.origin).toBe(peer.issuer);
    expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorize.searchParams.get("nonce")).toBeTruthy();
    expect(authorize.searchParams.get("login_hint")).toBe(email);

    const back = await signInAtProvider(email, email);
    expect(back.pathname).toBe("/done");
    const code = back.searchParams.get("code");
    expect(code).toBeTruthy();

    const exchanged = await t.request("/api/auth/sso/exchange", json({ code }));
    expect(exchanged.status).toBe(200);
    const pair = (await exchanged.json()) as { accessToken: string };
    // the session's amr names the method
    const claims = JSON.parse(Buffer.from(pair.accessToken.split(".")[1] ?? "", "base64url").toString()) as {
      amr?: string[];
    };
    expect(claims.amr).toEqual(["sso"]);
    const me = await t.request("/api/auth/me", { headers: { authorization: `Bearer ${pair.accessToken}` } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({
      user: { email, name: "Ada Lovelace" },
      tenant: { id: tenant.id },
      roles: ["admin"],
    });
    // the code is single-use
    expect((await t.request("/api/auth/sso/exchange", json({ code }))).status).toBe(401);

    const db = t.db;
    const [user] = await db.select().from(users).where(eq(users.email, email));
    expect(user).toMatchObject({ pool: "tenant", tenantId: tenant.id, passwordHash: null });
    const [membership] = await db
      .select()
      .from(tenantMemberships)
      .where(eq(tenantMemberships.userId, user?.id ?? ""));
    expect(membership?.role).toBe("admin");
  }, 60_000);

  test("an address of a domain no tenant verified is not routed (404)", async () => {
    const domain = uniqueDomain();
    const db = t.db;
    await ssoTenant(other.id, domain);
    await db
      .update(tenantEmailDomains)
      .set({ status: "pending" })
      .where(eq(tenantEmailDomains.domain, domain));
    expect((await discover(`bob@${domain}`)).status).toBe(404);
    expect((await discover(`bob@nowhere-${crypto.randomUUID().slice(0, 6)}.example`)).status).toBe(404);
  });

  test("a returnTo outside the allowed origins is refused (403, naming the origin); one that is no URL is a 400 naming returnTo", async () => {
    const res = await discover("x@example.com", "https://evil.example/steal");
    expect(res.status).toBe(403);
    expect(JSON.stringify(await res.json())).toContain("https://evil.example");
    const bad = await discover("x@example.com", "not a url");
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain("returnTo");
  });

  test("a made-up code or state is refused", async () => {
    expect((await t.request("/api/auth/sso/exchange", json({ code: "made-up" }))).status).toBe(401);
    expect((await t.request("/api/auth/sso/oidc/callback?state=made-up&code=x")).status).toBe(404);
  });
});

describe("seats", () => {
  test("just-in-time provisioning takes a seat: a full plan refuses the new member (seat_limit_reached), an existing member still signs in", async () => {
    const full = await signedInTenant(t, { plan: "enterprise" });
    const domain = uniqueDomain();
    await ssoTenant(full.id, domain);
    const seats = (limit: number) =>
      updateFeatureOverride(t.deps, systemCtx("test", full.id), {
        featureKey: "seats",
        enabled: true,
        limit,
        reason: "test",
      });
    // its three members fill the plan's three seats
    await seats(3);
    const email = `newcomer@${domain}`;
    peer.users.set(email, { name: "Newcomer", groups: [] });
    const refused = await signInAtProvider(email, email);
    expect(refused.searchParams.get("error")).toBe("seat_limit_reached");
    expect(refused.searchParams.get("code")).toBeNull();
    const db = t.db;
    expect(await db.select().from(users).where(eq(users.email, email))).toEqual([]);
    const failure = (await db.select().from(auditEvents).where(eq(auditEvents.tenantId, full.id))).find(
      (row) => row.outcome === "failure",
    );
    expect(failure?.details).toMatchObject({ method: "sso", check: "seats" });
    expect(String((failure?.details as { reason?: string } | undefined)?.reason)).toContain(
      '"seats" (3 seats)',
    );

    // one seat more: the same person is provisioned
    await seats(4);
    const admitted = await signInAtProvider(email, email);
    expect(admitted.searchParams.get("code")).toBeTruthy();
    // the plan full again: a member already there takes no new seat and signs in
    await seats(4);
    expect((await signInAtProvider(email, email)).searchParams.get("code")).toBeTruthy();
  }, 60_000);
});

describe("bound to the browser that started it", () => {
  test("a callback the attacker's own sign-in produced is refused in the victim's browser (login CSRF)", async () => {
    const victimTenant = await signedInTenant(t, { plan: "enterprise" });
    const domain = uniqueDomain();
    await ssoTenant(victimTenant.id, domain);
    const attackerEmail = `mallory@${domain}`;
    peer.users.set(attackerEmail, { name: "Mallory", groups: [] });
    // the attacker signs in at the provider in their own browser and keeps the callback URL
    const attacker = await stage.browser().newContext();
    const page = await attacker.newPage();
    let captured = "";
    // the provider's redirect to the callback, stopped before it arrives (CDP sees redirected requests)
    const cdp = await attacker.newCDPSession(page);
    await cdp.send("Fetch.enable", { patterns: [{ urlPattern: "*/api/auth/sso/oidc/callback*" }] });
    cdp.on("Fetch.requestPaused", (event: { requestId: string; request: { url: string } }) => {
      captured = event.request.url;
      void cdp.send("Fetch.failRequest", { requestId: event.requestId, errorReason: "Aborted" });
    });
    const { redirectUrl } = await postInBrowser(page, "/api/auth/sso/discover", {
      email: attackerEmail,
      returnTo: `${appOrigin()}/done`,
    });
    await page.goto(redirectUrl);
    await loginAtProvider(page, attackerEmail);
    for (let i = 0; i < 200 && !captured; i++) await page.waitForTimeout(25);
    await attacker.close();
    expect(new URL(captured).searchParams.get("code")).toBeTruthy();

    // the victim's browser is made to open it: refused, no code, the failed check recorded
    const victim = await stage.browser().newContext();
    const victimPage = await victim.newPage();
    await Promise.all([
      victimPage.waitForURL((url) => url.origin === appOrigin()),
      victimPage.goto(captured),
    ]);
    const landed = new URL(victimPage.url());
    await victim.close();
    expect(landed.searchParams.get("error")).toBe("sso_failed");
    expect(landed.searchParams.get("code")).toBeNull();
    const failures = await t.db.select().from(auditEvents).where(eq(auditEvents.tenantId, victimTenant.id));
    expect(failures.find((row) => row.outcome === "failure")?.details).toMatchObject({ check: "browser" });
    const [user] = await t.db.select().from(users).where(eq(users.email, attackerEmail));
    expect(user).toBeUndefined();
  }, 60_000);
});

describe("a test sign-in", () => {
  /** An owner starts a test sign-in from the browser; the callback's report, as the browser gets it. */
  async function testReport(owner: SignedInTenant["owner"], connectionId: string, login: string) {
    const context = await stage.browser().newContext();
    try {
      const page = await context.newPage();
      const { redirectUrl } = await postInBrowser(
        page,
        `/api/tenant/sso/connections/${connectionId}/test`,
        {},
        owner.headers,
      );
      await page.goto(redirectUrl);
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url().includes("/api/auth/sso/oidc/callback")),
        loginAtProvider(page, login),
      ]);
      expect(response.status()).toBe(200);
      return (await response.json()) as {
        ok: boolean;
        checks: { check: string; ok: boolean; detail: string }[];
        profile: { email: string; role: string } | null;
      };
    } finally {
      await context.close();
    }
  }

  test("reports every check in words against the real provider, and signs no one in", async () => {
    const owned = await signedInTenant(t, { plan: "enterprise" });
    const domain = uniqueDomain();
    const connection = await ssoTenant(owned.id, domain, { status: "inactive" });
    const email = `tess@${domain}`;
    peer.users.set(email, { name: "Tess", groups: ["plinth-admins"] });
    const good = await testReport(owned.owner, connection.id, email);
    expect(good.ok).toBe(true);
    expect(good.checks.map((c) => c.check)).toEqual(
      expect.arrayContaining([
        "browser",
        "signature",
        "issuer",
        "audience",
        "clock",
        "nonce",
        "email_domain",
      ]),
    );
    expect(good.checks.every((c) => c.ok && c.detail.length > 10)).toBe(true);
    expect(good.profile).toMatchObject({ email, role: "admin" });

    // an address outside the tenant's verified domains: the check that failed, in words
    const stranger = `sam@elsewhere-${crypto.randomUUID().slice(0, 6)}.example`;
    peer.users.set(stranger, { name: "Sam", groups: [] });
    const bad = await testReport(owned.owner, connection.id, stranger);
    expect(bad.ok).toBe(false);
    expect(bad.checks.find((c) => !c.ok)).toMatchObject({ check: "email_domain" });
    expect(bad.checks.find((c) => !c.ok)?.detail).toContain("not a verified e-mail domain");
    for (const address of [email, stranger]) {
      const [user] = await t.db.select().from(users).where(eq(users.email, address));
      expect(user).toBeUndefined();
    }
  }, 90_000);
});
