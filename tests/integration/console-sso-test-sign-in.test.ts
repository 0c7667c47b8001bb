import { afterAll, beforeAll, expect, test } from "bun:test";
import { and, count, eq, inArray, sql } from "drizzle-orm";
import type { Page } from "playwright-core";
import { ManualClock } from "../../src/clock.ts";
import {
  auditEvents,
  sessions,
  ssoSignInAttempts,
  ssoSignInCodes,
  tenantEmailDomains,
  tenantMemberships,
  users,
} from "../../src/db/schema/index.ts";
import { type OidcPeer, startOidcPeer } from "../fixtures/oidc-provider.ts";
import { cspComplaints } from "../helpers/chromium.ts";
import { tenantConsole } from "../helpers/console-tenant.ts";
import { newMasterKey, PASSWORD, type SignedInTenant, signedInTenant } from "../helpers/identity.ts";
import { startSamlIdp, type TestIdp } from "../helpers/saml-idp.ts";
import { useSsoStage } from "../helpers/sso-stage.ts";

/**
 * Issue #34 point 5 in a browser: a tenant's owner signs in to the console (served by the API on a
 * real socket), adds an OIDC connection at a real OpenID provider and a SAML one from a real IdP's
 * metadata, presses "Test sign-in", signs in at the provider's own login page, and comes back to
 * the console's report: every check in words and the mapped claims, or the failed check ("wrong
 * audience", "clock skew", "unsigned assertion", the client secret refused). A test sign-in signs
 * no one in: no session, no user, no membership, no code. Every console page runs with the
 * console's Content-Security-Policy and no page error.
 */

const clock = new ManualClock(Date.now());
const stage = useSsoStage(
  {
    "Security:TenantSecrets:KeyId": "console-sso-browser",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    // the test's provider and IdP listen on the loopback address
    "Sso:AllowPrivateProviders": "true",
  },
  { clock, console: true },
);
const { t, base } = stage;
let peer: OidcPeer;
let idp: TestIdp;
let tenant: SignedInTenant;
// the x: eight hex digits alone may spell an IP address, which the hostname rules refuse
const domain = `corp-${crypto.randomUUID().slice(0, 8)}x.example`;

beforeAll(async () => {
  // the provider and the IdP are another site than the API's (localhost, not 127.0.0.1), as real
  // ones are: the way back to the console is cross-site, and its SameSite=Strict session cookie must
  // still reach the report
  peer = await startOidcPeer({ redirectUri: `${base()}/api/auth/sso/oidc/callback`, host: "localhost" });
  idp = startSamlIdp({ host: "localhost" });
  tenant = await signedInTenant(t, { plan: "enterprise" });
  // the domain proved by its TXT record (docs/sso.md): the DNS leg is sso-email-domains.test's
  await t.db
    .insert(tenantEmailDomains)
    .values({ tenantId: tenant.id, domain, status: "verified", verificationToken: "x" });
}, 60_000);
afterAll(async () => {
  await peer?.stop();
  idp?.stop();
});

/** The owner's browser, signed in to the console; `problems` collects CSP refusals and page errors. */
async function ownerConsole(): Promise<{ page: Page; problems: string[]; close: () => Promise<void> }> {
  const context = await stage.browser().newContext();
  const page = await context.newPage();
  const problems = cspComplaints(page, { pageErrors: true });
  await page.goto(`${base()}/console/sign-in`);
  await page.fill("#email", tenant.owner.email);
  await page.fill("#password", PASSWORD);
  await page.fill("#tenant", tenant.code);
  await Promise.all([
    page.waitForURL((url) => url.pathname === "/console/security-policy"),
    page.click("main button[type=submit]"),
  ]);
  return { page, problems, close: () => context.close() };
}

/** The ids of the connections the SSO page lists, in its order. */
const connectionIds = async (page: Page) =>
  [...(await page.content()).matchAll(/\/console\/sso\/connections\/([0-9a-f-]{36})\/test/g)].map(
    (m) => m[1] ?? "",
  );

/** What a test sign-in must leave as it was: the tenant's users, memberships, sessions and codes. */
async function footprint() {
  const db = t.db;
  const ids = (await db.select({ id: users.id }).from(users).where(eq(users.tenantId, tenant.id))).map(
    (u) => u.id,
  );
  const [memberships] = await db
    .select({ n: count() })
    .from(tenantMemberships)
    .where(eq(tenantMemberships.tenantId, tenant.id));
  const [open] = await db.select({ n: count() }).from(sessions).where(inArray(sessions.userId, ids));
  const [codes] = await db
    .select({ n: count() })
    .from(ssoSignInCodes)
    .where(eq(ssoSignInCodes.tenantId, tenant.id));
  return { users: ids.length, memberships: memberships?.n, sessions: open?.n, codes: codes?.n };
}

/** The tenant's failed sign-ins through connections of `type` in the audit log, oldest first. */
const failedRows = (type: "oidc" | "saml") =>
  t.db
    .select()
    .from(auditEvents)
    .where(
      and(
        eq(auditEvents.tenantId, tenant.id),
        eq(auditEvents.action, "auth.sign_in"),
        eq(auditEvents.outcome, "failure"),
        sql`${auditEvents.details}->>'type' = ${type}`,
      ),
    )
    .orderBy(auditEvents.id);

/** The check each of those failures names. */
const failedChecks = async (type: "oidc" | "saml") =>
  (await failedRows(type)).map((row) => (row.details as { check?: string }).check);

/**
 * Presses "Test sign-in" on connection `id`, lets `atProvider` do what the person does at the
 * provider, and answers the console's report page (its main text) once the browser is back on it.
 */
async function testSignIn(page: Page, id: string, atProvider: () => Promise<void>): Promise<string> {
  await page.goto(`${base()}/console/sso`);
  await Promise.all([
    page.waitForURL((url) => url.pathname === `/console/sso/connections/${id}/test`),
    page.click(`form[action="/console/sso/connections/${id}/test"] button`),
  ]);
  // the console's page says what happens next; its link goes on to the provider
  expect(await page.textContent("main")).toContain("Test sign-in started.");
  await page.click("#continue-to-provider");
  await atProvider();
  await page.waitForURL(
    (url) => url.origin === base() && url.pathname === `/console/sso/connections/${id}/test-report`,
  );
  return (await page.textContent("main")) ?? "";
}

/** Saves `fields` in connection `id`'s edit form on the console's SSO page. */
async function editConnection(page: Page, id: string, fields: Record<string, string>) {
  await page.goto(`${base()}/console/sso`);
  const form = `form[action="/console/sso/connections/${id}/edit"]`;
  await page.click(`details:has(${form}) > summary`);
  for (const [field, value] of Object.entries(fields)) await page.fill(`#edit-${id}-${field}`, value);
  await Promise.all([
    page.waitForURL((url) => url.search === "?connectionSaved"),
    page.click(`${form} button[type="submit"]`),
  ]);
}

/** At the OpenID provider's own login page: the login name and any password. */
async function oidcLogin(page: Page, login: string) {
  await page.waitForURL((url) => url.origin === peer.issuer);
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', "any");
  await page.click('button[type="submit"]');
}

test("OIDC: an owner adds a connection in the console, tests it at the real provider and reads every check and the mapped claims; a wrong secret and clock skew read in words and are in the audit log; nobody is signed in", async () => {
  const { page, problems, close } = await ownerConsole();
  try {
    await page.goto(`${base()}/console/sso`);
    await page.fill("#oidc-issuer", peer.issuer);
    await page.fill("#oidc-client-id", peer.clientId);
    await page.fill("#oidc-client-secret", peer.clientSecret);
    await Promise.all([
      page.waitForURL((url) => url.search === "?connected"),
      page.click('form:has(#oidc-issuer) button[type="submit"]'),
    ]);
    const [id = ""] = await connectionIds(page);
    expect(id).not.toBe("");
    // the provider's groups map to a role: set in the console's edit form
    await editConnection(page, id, { "group-roles": "plinth-admins = admin" });

    const email = `tess@${domain}`;
    peer.users.set(email, { name: "Tess Ting", groups: ["plinth-admins", "staff"] });
    const before = await footprint();
    const passed = await testSignIn(page, id, () => oidcLogin(page, email));
    expect(passed).toContain("Test sign-in passed");
    expect(passed).toContain(email);
    expect(passed).toContain("Tess Ting");
    expect(passed).toContain("plinth-admins");
    expect(passed).toMatch(/would (sign in|be) .*admin/);
    expect(passed).toContain("The ID token's audience (aud) is this connection's client id.");
    expect(passed).toContain(`${domain} is a verified domain of this tenant.`);
    // the report's address opens for this tenant only, and unaltered
    const report = new URL(page.url());
    const reportPath = `${report.pathname}${report.search}`;
    expect(report.searchParams.get("report")).not.toContain(email);
    const other = await signedInTenant(t, { plan: "enterprise" });
    const stranger = await tenantConsole(t, base()).signInAs(other, other.owner.email);
    const foreign = await t.request(reportPath, { headers: { cookie: stranger.jar.header() } });
    expect(foreign.status).toBe(404);
    expect(await foreign.text()).not.toContain(email);
    // an altered address does not open either
    const sealed = report.searchParams.get("report") ?? "";
    const altered = await page.request.get(
      `${base()}${report.pathname}?report=${sealed.slice(0, -4)}${sealed.endsWith("AAAA") ? "BBBB" : "AAAA"}`,
    );
    expect(altered.status()).toBe(404);

    // a wrong client secret: the provider refuses the code exchange
    await editConnection(page, id, { "client-secret": "not-the-secret" });
    const refused = await testSignIn(page, id, async () => {});
    expect(refused).toContain("Test sign-in failed");
    expect(refused).toContain("The provider refused the client id or secret");
    // put right again
    await editConnection(page, id, { "client-secret": peer.clientSecret });

    // Plinth's clock ten minutes behind the provider's: the ID token was issued in its future
    clock.set(Date.now() - 10 * 60_000);
    try {
      const skewed = await testSignIn(page, id, async () => {});
      expect(skewed).toContain("Test sign-in failed (clock)");
      expect(skewed).toContain("The ID token was issued in the future (iat)");
      expect(skewed).toContain("clock skew");
    } finally {
      clock.set(Date.now());
    }

    expect(await footprint()).toEqual(before);
    expect(await t.db.select().from(users).where(eq(users.email, email))).toEqual([]);
    expect(
      await t.db.select().from(ssoSignInAttempts).where(eq(ssoSignInAttempts.tenantId, tenant.id)),
    ).toEqual([]);
    // each failure is in the audit log, the one with the clock behind too
    expect(await failedChecks("oidc")).toEqual(["client_credentials", "clock"]);
    expect(problems).toEqual([]);
  } finally {
    await close();
  }
}, 60_000);

test("SAML: an owner adds a connection from the IdP's metadata, tests it through the IdP and reads the report; wrong audience, unsigned assertion and clock skew (ahead, then behind) read in words and are in the audit log; nobody is signed in", async () => {
  const { page, problems, close } = await ownerConsole();
  try {
    await page.goto(`${base()}/console/sso`);
    const known = await connectionIds(page);
    await page.fill("#saml-metadata-xml", idp.metadataXml);
    await Promise.all([
      page.waitForURL((url) => url.search === "?connected"),
      page.click('form:has(#saml-metadata-xml) button[type="submit"]'),
    ]);
    const id = (await connectionIds(page)).find((c) => !known.includes(c)) ?? "";
    expect(id).not.toBe("");
    expect(await page.textContent("main")).toContain(idp.entityId);

    const email = `grace@${domain}`;
    idp.user = { email, name: "Grace Hopper", groups: ["staff"] };
    const before = await footprint();
    // the IdP posts its signed response to the ACS by itself (its page's own script)
    const passed = await testSignIn(page, id, async () => {});
    expect(passed).toContain("Test sign-in passed");
    expect(passed).toContain(email);
    expect(passed).toContain("Grace Hopper");
    expect(passed).toMatch(/would (sign in|be) .*member/);

    const failures: [Partial<TestIdp["setup"]>, string][] = [
      [{ audience: "https://wrong.example/sp" }, "wrong audience"],
      [{ sign: "none" }, "unsigned assertion"],
    ];
    for (const [setup, words] of failures) {
      idp.setup = setup;
      try {
        const report = await testSignIn(page, id, async () => {});
        expect(report).toContain("Test sign-in failed");
        expect(report).toContain(words);
      } finally {
        idp.setup = {};
      }
    }
    // Plinth's clock eight minutes ahead of the IdP's: the assertion (five minutes) has expired
    clock.set(Date.now() + 8 * 60_000);
    try {
      const skewed = await testSignIn(page, id, async () => {});
      expect(skewed).toContain("Test sign-in failed (clock)");
      expect(skewed).toContain("clock skew: the assertion has expired");
    } finally {
      clock.set(Date.now());
    }
    // ten minutes behind it (a step back after the one ahead): the assertion is not valid yet
    clock.set(Date.now() - 10 * 60_000);
    try {
      const early = await testSignIn(page, id, async () => {});
      expect(early).toContain("Test sign-in failed (clock)");
      expect(early).toContain("clock skew: the assertion is not valid yet");
    } finally {
      clock.set(Date.now());
    }

    expect(await footprint()).toEqual(before);
    expect(await t.db.select().from(users).where(eq(users.email, email))).toEqual([]);
    // every failure is in the audit log: the audit limiter's buckets did not outlast the clock's steps
    expect(await failedChecks("saml")).toEqual(["audience", "signature", "clock", "clock"]);
    const reasons = (await failedRows("saml")).map((row) => (row.details as { reason?: string }).reason);
    expect(reasons[2]).toContain("the assertion has expired");
    expect(reasons[3]).toContain("the assertion is not valid yet");
    expect(problems).toEqual([]);
  } finally {
    await close();
  }
}, 60_000);
