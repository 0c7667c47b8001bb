import { afterAll, beforeAll, expect, test } from "bun:test";
import { and, eq, isNull, sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import type { Browser, CDPSession, Page } from "playwright-core";
import { ManualClock } from "../../src/clock.ts";
import { auditEvents, passkeys, sessions, webhookEvents } from "../../src/db/schema/index.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { cspComplaints, launchChromium, signInToConsole } from "../helpers/chromium.ts";
import {
  activeDomain,
  createUser,
  PASSWORD,
  readyPlatformUser,
  type SignedInTenant,
  type SignedInUser,
  signedInTenant,
  signIn,
} from "../helpers/identity.ts";

// Passkeys in Debian's Chromium with a CDP virtual authenticator (ctap2, internal, resident keys,
// user verification): real navigator.credentials calls on pages Plinth serves, on the platform host
// (`localhost`) and a tenant's Active custom domain (`<code>.localhost`), both secure contexts over
// plain HTTP as browsers treat localhost names. Register, sign in with the passkey alone, refused on
// another relying-party id, replay refused, list / rename / remove, another tenant's 404.

/** What the pages' script uses of WebAuthn (the suite's TypeScript has no DOM library). */
declare const PublicKeyCredential: {
  parseCreationOptionsFromJSON(options: unknown): unknown;
  parseRequestOptionsFromJSON(options: unknown): unknown;
};
interface Credentials {
  create(options: { publicKey: unknown }): Promise<{ toJSON(): unknown }>;
  get(options: { publicKey: unknown }): Promise<{ toJSON(): unknown }>;
}

let server: ReturnType<typeof Bun.serve> | undefined;
let port = 0;
let browser: Browser;
beforeAll(() => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request, s) => app.app.fetch(request, { peerAddress: s.requestIP(request)?.address }),
  });
  port = server.port ?? 0;
});
const clock = new ManualClock();
const app = useTestApp({
  clock,
  settings: relaxedLimits,
  env: () => ({ BrowserAuth__AllowedOrigins__0: `http://localhost:${port}` }),
});

let tenant: SignedInTenant;
let other: SignedInTenant;
let tenantHost = "";

beforeAll(async () => {
  tenant = await signedInTenant(app);
  other = await signedInTenant(app);
  tenantHost = await activeDomain(app.db, tenant.id, `${tenant.code}.localhost`);
  browser = await launchChromium([
    "--host-resolver-rules=MAP localhost 127.0.0.1, MAP *.localhost 127.0.0.1",
  ]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.stop(true);
});

/** A new member of the tenant, signed in with a password, with no second factor yet. */
async function freshUser(): Promise<SignedInUser> {
  return signIn(app, await createUser(app.db, tenant.id, { role: "member" }), tenant.code);
}

/** A page with a virtual authenticator of its own (a passkey-capable platform authenticator). */
async function pageWithAuthenticator(): Promise<{ page: Page; cdp: CDPSession; authenticatorId: string }> {
  const page = await (await browser.newContext()).newPage();
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { page, cdp, authenticatorId };
}

type Answer = { status: number; body: unknown };

/** In the page: register a passkey through the API (bearer token), as a client app would. */
function register(page: Page, input: { token: string; name: string }): Promise<Answer> {
  return page.evaluate(async ({ token, name }) => {
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const options = await (
      await fetch("/api/auth/passkeys/register/options", { method: "POST", headers })
    ).json();
    const credential = await (navigator as unknown as { credentials: Credentials }).credentials.create({
      publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options),
    });
    const answer = await fetch("/api/auth/passkeys/register/verify", {
      method: "POST",
      headers,
      body: JSON.stringify({ name, response: credential.toJSON() }),
    });
    return { status: answer.status, body: await answer.json() };
  }, input);
}

/** In the page: a usernameless assertion for the options this host gives (`tenant`: a code). */
function assertion(page: Page, tenant?: string): Promise<unknown> {
  return page.evaluate(async (code) => {
    const options = await (
      await fetch("/api/auth/passkeys/login/options", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(code ? { tenant: code } : {}),
      })
    ).json();
    try {
      const credential = await (navigator as unknown as { credentials: Credentials }).credentials.get({
        publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options),
      });
      return credential.toJSON();
    } catch (error) {
      return { refused: (error as Error).name };
    }
  }, tenant);
}

/** POST /api/auth/passkeys/login/verify from the test, as the given host. */
function signInWith(response: unknown, host: string, tenantCode?: string): Promise<Response> {
  return app.request(`http://${host}:${port}/api/auth/passkeys/login/verify`, {
    method: "POST",
    headers: { "content-type": "application/json", host: `${host}:${port}` },
    body: JSON.stringify({ response, ...(tenantCode ? { tenant: tenantCode } : {}) }),
  });
}

const onHost = (host: string, path: string, init: RequestInit = {}) =>
  app.request(`http://${host}:${port}${path}`, {
    ...init,
    headers: { host: `${host}:${port}`, ...(init.headers as Record<string, string>) },
  });

test("a tenant owner registers a passkey on the tenant's domain and signs in with it alone; replay and another host are refused", async () => {
  const { page } = await pageWithAuthenticator();
  await page.goto(`http://${tenantHost}:${port}/api/health`);

  const registered = await register(page, { token: tenant.owner.accessToken, name: "Work laptop" });
  expect(registered.status).toBe(201);
  const created = registered.body as { id: string; name: string; rpId: string; backupEligible: boolean };
  expect(created).toMatchObject({ name: "Work laptop", rpId: tenantHost, backupEligible: false });

  // usernameless: no e-mail, the authenticator offers its discoverable credential
  const signed = await assertion(page);
  expect(signed).not.toHaveProperty("refused");
  const answer = await signInWith(signed, tenantHost);
  expect(answer.status).toBe(200);
  const pair = (await answer.json()) as { accessToken: string; refreshToken: string };
  const claims = decodeJwt(pair.accessToken);
  expect(claims.sub).toBe(tenant.owner.id);
  expect(claims.tid).toBe(tenant.id);
  // RFC 8176: a device-bound passkey (not backup eligible), user verified: hwk and mfa
  expect(claims.amr).toEqual(["hwk", "mfa"]);

  // the same assertion again: its challenge is spent
  expect((await signInWith(signed, tenantHost)).status).toBe(401);

  // another relying-party id: on the platform host the options name `localhost`, for which the
  // authenticator holds no credential: the browser refuses before anything reaches the server
  await page.goto(`http://localhost:${port}/api/health`);
  expect(await assertion(page, tenant.code)).toEqual({ refused: "NotAllowedError" });
  await page.close();
});

test("an assertion made on one host is refused on another, and the counter and flags are stored", async () => {
  const { page, cdp, authenticatorId } = await pageWithAuthenticator();
  await page.goto(`http://${tenantHost}:${port}/api/health`);
  const registered = await register(page, { token: tenant.admin.accessToken, name: "Phone" });
  expect(registered.status).toBe(201);
  const { id } = registered.body as { id: string };

  const made = await assertion(page);
  // the platform host with the tenant's code: another relying party, another origin
  expect((await signInWith(made, "localhost", tenant.code)).status).toBe(401);

  const again = await assertion(page);
  expect((await signInWith(again, tenantHost)).status).toBe(200);
  const [row] = await app.db.select().from(passkeys).where(eq(passkeys.id, id));
  expect(row?.counter).toBeGreaterThan(0);
  expect(row?.lastUsedAt).not.toBeNull();
  expect(row?.backupEligible).toBe(false);

  // no private key material anywhere: not in the table, not in a log line
  const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
  expect(credentials.length).toBe(1);
  const privateKey = credentials[0]?.privateKey ?? "";
  expect(privateKey.length).toBeGreaterThan(20);
  const dump = await app.db.execute(sql`select row_to_json(p)::text as row from passkeys p`);
  const rows = JSON.stringify(dump);
  expect(rows).not.toContain(privateKey);
  expect(rows).not.toContain(Buffer.from(privateKey, "base64").toString("base64url"));
  expect(app.logs.join("\n")).not.toContain(privateKey);
  await page.close();
});

test("list, rename and remove are the caller's own; removal steps up with the passkey; another tenant's id is 404; audit rows and events", async () => {
  const { page } = await pageWithAuthenticator();
  await page.goto(`http://${tenantHost}:${port}/api/health`);
  const user = await freshUser();
  const registered = await register(page, { token: user.accessToken, name: "Key" });
  expect(registered.status).toBe(201);
  const { id } = registered.body as { id: string };

  const listed = await onHost(tenantHost, "/api/auth/passkeys", { headers: user.headers });
  expect(listed.status).toBe(200);
  const list = (await listed.json()) as { items: { id: string; name: string }[] };
  expect(list.items.map((p) => p.id)).toEqual([id]);
  expect(JSON.stringify(list)).not.toMatch(/publicKey|credentialId|counter/);

  // another tenant's owner, and another user of the same tenant: 404, nothing changed
  const stranger = await freshUser();
  const rename = (headers: Record<string, string>) =>
    app.request(`/api/auth/passkeys/${id}`, {
      method: "PATCH",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ name: "Stolen" }),
    });
  expect((await rename(other.owner.headers)).status).toBe(404);
  expect((await rename(stranger.headers)).status).toBe(404);
  const removeAs = (headers: Record<string, string>) =>
    app.request(`/api/auth/passkeys/${id}`, { method: "DELETE", headers });
  expect((await removeAs(other.owner.headers)).status).toBe(404);
  expect((await removeAs(stranger.headers)).status).toBe(404);
  const othersList = await app.request("/api/auth/passkeys", { headers: other.owner.headers });
  expect(((await othersList.json()) as { items: unknown[] }).items).toEqual([]);

  const renamed = await rename(user.headers);
  expect(renamed.status).toBe(200);
  expect(((await renamed.json()) as { name: string }).name).toBe("Stolen");

  // removing a factor needs a fresh one: RFC 9470's challenge, then a step-up with the passkey
  const refused = await removeAs(user.headers);
  expect(refused.status).toBe(401);
  expect(refused.headers.get("www-authenticate")).toContain('error="insufficient_user_authentication"');
  const stepped = await page.evaluate(async (token) => {
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const options = await (
      await fetch("/api/auth/passkeys/step-up/options", { method: "POST", headers })
    ).json();
    const credential = await (navigator as unknown as { credentials: Credentials }).credentials.get({
      publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options),
    });
    const answer = await fetch("/api/auth/mfa/step-up", {
      method: "POST",
      headers,
      body: JSON.stringify({ passkey: credential.toJSON() }),
    });
    return { status: answer.status, body: await answer.json() };
  }, user.accessToken);
  expect(stepped.status).toBe(200);
  const fresh = (stepped.body as { accessToken: string }).accessToken;
  expect(decodeJwt(fresh).amr).toEqual(["pwd", "hwk", "mfa"]);
  const freshHeaders = { authorization: `Bearer ${fresh}` };
  expect((await removeAs(freshHeaders)).status).toBe(204);
  expect((await removeAs(freshHeaders)).status).toBe(404);
  // removed: it signs in no more
  expect((await signInWith(await assertion(page), tenantHost)).status).toBe(401);

  const actions = await app.db
    .select({ action: auditEvents.action })
    .from(auditEvents)
    .where(and(eq(auditEvents.tenantId, tenant.id), eq(auditEvents.targetId, id)));
  expect(actions.map((a) => a.action).sort()).toEqual([
    "passkey.registered",
    "passkey.removed",
    "passkey.renamed",
  ]);
  const events = await app.db
    .select({ type: webhookEvents.type, data: webhookEvents.data })
    .from(webhookEvents)
    .where(eq(webhookEvents.tenantId, tenant.id));
  const ours = events.filter((e) => (e.data as { passkeyId?: string }).passkeyId === id);
  expect(ours.map((e) => e.type).sort()).toEqual(["passkey.registered", "passkey.removed"]);
  await page.close();
});

test("a passkey is the second factor of a password sign-in: the step lists it, its assertion completes the step once", async () => {
  const { page } = await pageWithAuthenticator();
  await page.goto(`http://${tenantHost}:${port}/api/health`);
  const user = await freshUser();
  expect((await register(page, { token: user.accessToken, name: "Second factor" })).status).toBe(201);

  const first = await onHost(tenantHost, "/api/auth/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: user.email, password: PASSWORD }),
  });
  expect(first.status).toBe(200);
  const step = (await first.json()) as { mfaRequired: boolean; mfaToken: string; methods: string[] };
  expect(step).toMatchObject({ mfaRequired: true, methods: ["passkey"] });
  expect(step).not.toHaveProperty("accessToken");

  const proof = await page.evaluate(async (mfaToken) => {
    const headers = { "content-type": "application/json" };
    const options = await (
      await fetch("/api/auth/passkeys/login/options", {
        method: "POST",
        headers,
        body: JSON.stringify({ mfaToken }),
      })
    ).json();
    const credential = await (navigator as unknown as { credentials: Credentials }).credentials.get({
      publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options),
    });
    return {
      allowed: (options as { allowCredentials: unknown[] }).allowCredentials.length,
      passkey: credential.toJSON(),
    };
  }, step.mfaToken);
  expect(proof.allowed).toBe(1);
  const verify = () =>
    onHost(tenantHost, "/api/auth/mfa/verify", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ mfaToken: step.mfaToken, passkey: proof.passkey }),
    });
  const done = await verify();
  expect(done.status).toBe(200);
  const claims = decodeJwt(((await done.json()) as { accessToken: string }).accessToken);
  expect(claims.sub).toBe(user.id);
  expect(claims.amr).toEqual(["pwd", "hwk", "mfa"]);
  // the step token and the challenge are spent
  expect((await verify()).status).toBe(401);
  await page.close();
});

test("in the console a staff member adds a passkey, signs in with it alone, renames and removes it; no CSP violation", async () => {
  const staff = await readyPlatformUser(app.db, { role: "platform_viewer" });
  const { page, cdp, authenticatorId } = await pageWithAuthenticator();
  const violations = cspComplaints(page);
  const base = `http://localhost:${port}`;
  await signInToConsole(page, base, staff.email, PASSWORD);

  await page.goto(`${base}/console/passkeys`);
  await page.fill("#passkey-name", "Console key");
  await Promise.all([page.waitForURL(`${base}/console/passkeys?added`), page.click("#passkey-add button")]);
  expect(await page.locator("tbody th").allTextContents()).toEqual(["Console key"]);
  const [row] = await app.db.select().from(passkeys).where(eq(passkeys.userId, staff.id));
  expect(row).toMatchObject({ tenantId: null, rpId: "localhost", name: "Console key" });

  // signed out, the passkey alone signs in (no e-mail, no password): the sign-in page's conditional
  // request (the e-mail field's autofill), which the virtual authenticator answers at once
  await Promise.all([page.waitForURL(/sign-in\?signed-out/), page.click(".who button")]);
  await page.waitForURL(`${base}/console`);
  expect(await page.locator("h1").textContent()).toBe("Overview");
  const [signIn] = await app.db
    .select({ details: auditEvents.details })
    .from(auditEvents)
    .where(and(eq(auditEvents.action, "auth.sign_in"), eq(auditEvents.actorId, staff.id)))
    .orderBy(sql`${auditEvents.id} desc`)
    .limit(1);
  expect(signIn?.details).toMatchObject({ method: "passkey", kind: "browser" });

  // the password now asks for the second step, which the passkey completes. The user touches
  // nothing while typing the password (the sign-in page's conditional request stays open), then
  // the authenticator on the step page
  await cdp.send("WebAuthn.setAutomaticPresenceSimulation", { authenticatorId, enabled: false });
  await Promise.all([page.waitForURL(/sign-in\?signed-out/), page.click(".who button")]);
  await page.fill("#email", staff.email);
  await page.fill("#password", PASSWORD);
  await Promise.all([page.waitForURL(`${base}/console/sign-in`), page.click("button[type=submit]")]);
  expect(await page.locator("h1").textContent()).toBe("Second factor");
  await cdp.send("WebAuthn.setAutomaticPresenceSimulation", { authenticatorId, enabled: true });
  await Promise.all([page.waitForURL(`${base}/console`), page.click("#passkey-second-factor")]);
  const [stepped] = await app.db
    .select({ amr: sessions.amr })
    .from(sessions)
    // the one open session: the earlier ones were signed out
    .where(and(eq(sessions.userId, staff.id), isNull(sessions.revokedAt)));
  expect(stepped?.amr).toEqual(["pwd", "hwk", "mfa"]);

  await page.goto(`${base}/console/passkeys`);
  await page.fill(`#name-${row?.id}`, "Renamed key");
  await Promise.all([page.waitForURL(/renamed/), page.click("form.inline button.secondary")]);
  expect(await page.locator("tbody th").allTextContents()).toEqual(["Renamed key"]);
  await Promise.all([page.waitForURL(/removed/), page.click("form.inline button.danger")]);
  expect(await page.locator("tbody th").count()).toBe(0);
  expect(violations).toEqual([]);
  await page.close();
});

/** The reason of the newest refused passkey sign-in in the tenant's audit chain. */
async function lastRefusal(tenantId: string): Promise<unknown> {
  const [row] = await app.db
    .select({ details: auditEvents.details })
    .from(auditEvents)
    .where(
      and(
        eq(auditEvents.tenantId, tenantId),
        eq(auditEvents.action, "auth.sign_in"),
        eq(auditEvents.outcome, "failure"),
      ),
    )
    .orderBy(sql`${auditEvents.id} desc`)
    .limit(1);
  return (row?.details as { reason?: string } | undefined)?.reason;
}

test("a challenge answered after Passkeys:ChallengeSeconds (300 s) is refused", async () => {
  const { page } = await pageWithAuthenticator();
  await page.goto(`http://${tenantHost}:${port}/api/health`);
  expect((await register(page, { token: (await freshUser()).accessToken, name: "Late" })).status).toBe(201);
  const late = await assertion(page);
  clock.advance(301_000);
  expect((await signInWith(late, tenantHost)).status).toBe(401);
  expect(await lastRefusal(tenant.id)).toBe("challenge unknown, used, expired or of another host");
  await page.close();
});

test("a cloned authenticator, its counter behind the stored one, is refused and the passkey kept as it was", async () => {
  const first = await pageWithAuthenticator();
  await first.page.goto(`http://${tenantHost}:${port}/api/health`);
  const registered = await register(first.page, { token: (await freshUser()).accessToken, name: "Cloned" });
  expect(registered.status).toBe(201);
  const { id } = registered.body as { id: string };
  for (let i = 0; i < 2; i++)
    expect((await signInWith(await assertion(first.page), tenantHost)).status).toBe(200);
  const [before] = await app.db.select().from(passkeys).where(eq(passkeys.id, id));
  expect(before?.counter).toBeGreaterThanOrEqual(2);

  // the same private key in a second authenticator whose counter starts again at 0
  const { credentials } = await first.cdp.send("WebAuthn.getCredentials", {
    authenticatorId: first.authenticatorId,
  });
  const original = credentials[0];
  if (!original) throw new Error("the authenticator holds no credential");
  const clone = await pageWithAuthenticator();
  await clone.cdp.send("WebAuthn.addCredential", {
    authenticatorId: clone.authenticatorId,
    credential: { ...original, signCount: 0 },
  });
  await clone.page.goto(`http://${tenantHost}:${port}/api/health`);
  expect((await signInWith(await assertion(clone.page), tenantHost)).status).toBe(401);
  expect(await lastRefusal(tenant.id)).toBe("counter regression");
  const [after] = await app.db.select().from(passkeys).where(eq(passkeys.id, id));
  expect(after?.counter).toBe(before?.counter ?? -1);
  await clone.page.close();
  await first.page.close();
});
