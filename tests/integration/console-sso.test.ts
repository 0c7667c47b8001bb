import { afterAll, beforeAll, expect, test } from "bun:test";
import { URI } from "otpauth";
import { ManualClock } from "../../src/clock.ts";
import { readTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { type OidcPeer, startOidcPeer } from "../fixtures/oidc-provider.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { tenantConsole } from "../helpers/console-tenant.ts";
import { newMasterKey, signedInTenant } from "../helpers/identity.ts";
import { startSamlIdp, type TestIdp } from "../helpers/saml-idp.ts";

// Issue #34 point 5, the console side of SSO connections: an owner adds an OIDC connection (the
// issuer discovered at a real OpenID provider, the secret never shown back) and a SAML one (the
// IdP's metadata), enables, disables, deletes, starts a test sign-in and downloads the SP metadata,
// through the API's own functions; a refusal is shown on the page in words; admins read.

const ORIGIN = "https://ops.plinth.test";
// the provider knows the app's redirect URI, under its public base URL (nothing listens there: the
// test follows the leg up to the provider's login)
const PUBLIC_BASE = "http://127.0.0.1:1";
let peer: OidcPeer;
let idp: TestIdp;
beforeAll(async () => {
  peer = await startOidcPeer({ redirectUri: `${PUBLIC_BASE}/api/auth/sso/oidc/callback` });
  idp = startSamlIdp();
});
afterAll(async () => {
  await peer?.stop();
  idp?.stop();
});
const clock = new ManualClock(Date.now());
const app = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Server:PublicBaseUrl": PUBLIC_BASE,
    "Security:TenantSecrets:KeyId": "console-sso-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    // the test's provider and IdP listen on the loopback address
    "Sso:AllowPrivateProviders": "true",
  },
  env: { BrowserAuth__AllowedOrigins__0: ORIGIN },
});

const { post, get, signInAs } = tenantConsole(app, ORIGIN);
const connectionIds = (page: string, action: string) =>
  [...page.matchAll(new RegExp(`/console/sso/connections/([0-9a-f-]{36})/${action}`, "g"))].map((m) => m[1]);

test("an owner adds an OIDC connection discovered at a real provider; the secret is never shown; a failed discovery reads in words", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const { jar, csrf } = await signInAs(tenant, tenant.owner.email);
  const empty = await (await get(jar, "/console/sso")).text();
  expect(empty).not.toContain("use the API");
  expect(empty).toContain("No connection yet");

  const wrong = await post(jar, "/console/sso/connections", {
    csrf,
    type: "oidc",
    issuer: `${peer.issuer}/no-such-issuer`,
    clientId: peer.clientId,
    clientSecret: peer.clientSecret,
  });
  expect(wrong.status).toBe(422);
  const refusal = await wrong.text();
  expect(refusal).toContain('class="notice bad"');
  expect(refusal).toContain("The issuer cannot be used");
  expect(refusal).toContain("No connection yet");

  const added = await post(jar, "/console/sso/connections", {
    csrf,
    type: "oidc",
    issuer: peer.issuer,
    clientId: peer.clientId,
    clientSecret: peer.clientSecret,
  });
  expect(added.status).toBe(303);
  expect(added.headers.get("location")).toBe("/console/sso?connected");
  const page = await (await get(jar, "/console/sso?connected")).text();
  expect(page).toContain("Connection added.");
  expect(page).toContain(peer.issuer);
  expect(page).toContain(peer.clientId);
  expect(page).toContain("secret set");
  expect(page).not.toContain(peer.clientSecret);
  const listed = (await (
    await app.request("/api/tenant/sso/connections", { headers: tenant.owner.headers })
  ).json()) as { items: { id: string; enabled: boolean; oidc: { issuer: string } }[] };
  expect(listed.items).toHaveLength(1);
  expect(listed.items[0]).toMatchObject({ enabled: true, oidc: { issuer: peer.issuer } });
  const [id] = connectionIds(page, "disable");
  expect(id).toBe(listed.items[0]?.id);

  // the test sign-in's page links on to the provider's authorization endpoint (a link: the console's
  // form-action 'self' refuses a form post redirected off the origin), which takes it (PKCE, state, nonce)
  const testSignIn = await post(jar, `/console/sso/connections/${id}/test`, { csrf });
  expect(testSignIn.status).toBe(200);
  const started = await testSignIn.text();
  expect(started).toContain("Test sign-in started.");
  const link = /id="continue-to-provider" href="([^"]+)"/.exec(started)?.[1] ?? "";
  const authorize = new URL(link.replaceAll("&amp;", "&"));
  expect(authorize.origin).toBe(peer.issuer);
  expect(authorize.searchParams.get("client_id")).toBe(peer.clientId);
  expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
  expect(authorize.searchParams.get("state")).toBeTruthy();
  const atProvider = await fetch(authorize, { redirect: "manual" });
  expect(atProvider.status).toBe(303);
  expect(atProvider.headers.get("location")).toContain("/interaction/");

  expect((await post(jar, `/console/sso/connections/${id}/disable`, { csrf })).status).toBe(303);
  const disabled = await (await get(jar, "/console/sso?connectionDisabled")).text();
  expect(disabled).toContain("Connection disabled");
  expect(connectionIds(disabled, "enable")).toEqual([id]);
  expect((await post(jar, `/console/sso/connections/${id}/enable`, { csrf })).status).toBe(303);
  expect((await post(jar, `/console/sso/connections/${id}/delete`, { csrf })).status).toBe(303);
  expect(await (await get(jar, "/console/sso?connectionDeleted")).text()).toContain("No connection yet");
});

test("an owner edits a connection: name, role, group roles, a rotated client secret (never shown); a bad issuer or group line reads in words", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const { jar, csrf } = await signInAs(tenant, tenant.owner.email);
  const added = await post(jar, "/console/sso/connections", {
    csrf,
    type: "oidc",
    issuer: peer.issuer,
    clientId: peer.clientId,
    clientSecret: "the-first-secret",
  });
  expect(added.status).toBe(303);
  const page = await (await get(jar, "/console/sso")).text();
  const [id] = connectionIds(page, "edit");
  expect(id).toBeTruthy();
  expect(page).toContain(`value="${peer.issuer}"`);
  expect(page).not.toContain("the-first-secret");
  const keyring = app.deps.tenantSecretKeyring;
  if (!keyring) throw new Error("no keyring");
  const secretName = `sso.${id}.client_secret`;
  expect(await readTenantSecret(app.db, keyring, tenant.id, secretName)).toBe("the-first-secret");

  const form = {
    csrf,
    name: "Corporate Okta",
    defaultRole: "member",
    groupRoles: "plinth-admins = admin\nplinth-owners: owner",
    issuer: peer.issuer,
    clientId: peer.clientId,
  };
  // the secret left empty: kept
  const saved = await post(jar, `/console/sso/connections/${id}/edit`, form);
  expect(saved.status).toBe(303);
  expect(saved.headers.get("location")).toBe("/console/sso?connectionSaved");
  expect(await readTenantSecret(app.db, keyring, tenant.id, secretName)).toBe("the-first-secret");
  const edited = await (await get(jar, "/console/sso?connectionSaved")).text();
  expect(edited).toContain("Connection saved.");
  expect(edited).toContain("Corporate Okta");
  expect(edited).toContain("plinth-admins = admin");
  // rotated: the new secret is sealed, never shown back
  expect(
    (await post(jar, `/console/sso/connections/${id}/edit`, { ...form, clientSecret: "the-second-secret" }))
      .status,
  ).toBe(303);
  expect(await readTenantSecret(app.db, keyring, tenant.id, secretName)).toBe("the-second-secret");
  expect(await (await get(jar, "/console/sso")).text()).not.toContain("the-second-secret");
  const [connection] = (
    (await (await app.request(`/api/tenant/sso/connections`, { headers: tenant.owner.headers })).json()) as {
      items: { name: string; defaultRole: string; groupRoles: Record<string, string> }[];
    }
  ).items;
  expect(connection).toMatchObject({
    name: "Corporate Okta",
    defaultRole: "member",
    groupRoles: { "plinth-admins": "admin", "plinth-owners": "owner" },
  });

  const badIssuer = await post(jar, `/console/sso/connections/${id}/edit`, {
    ...form,
    issuer: `${peer.issuer}/no-such-issuer`,
  });
  expect(badIssuer.status).toBe(422);
  expect(await badIssuer.text()).toContain("The issuer cannot be used");
  const badLine = await post(jar, `/console/sso/connections/${id}/edit`, {
    ...form,
    groupRoles: "admins -> boss",
  });
  expect(badLine.status).toBe(400);
  expect(await badLine.text()).toContain("is not");
});

test("an owner adds a SAML connection from pasted metadata and downloads the SP metadata; a second enabled one is refused in words; admins read; a free plan gets 402", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const { jar, csrf } = await signInAs(tenant, tenant.owner.email);
  const added = await post(jar, "/console/sso/connections", {
    csrf,
    type: "saml",
    metadataXml: idp.metadataXml,
  });
  expect(added.status).toBe(303);
  const page = await (await get(jar, "/console/sso")).text();
  expect(page).toContain(idp.entityId);
  const [id] = connectionIds(page, "saml-metadata");
  const metadata = await get(jar, `/console/sso/connections/${id}/saml-metadata`);
  expect(metadata.status).toBe(200);
  expect(metadata.headers.get("content-type")).toContain("application/samlmetadata+xml");
  expect(await metadata.text()).toContain(`/api/auth/sso/saml/${id}/acs`);

  const neither = await post(jar, "/console/sso/connections", { csrf, type: "saml" });
  expect(neither.status).toBe(400);
  expect(await neither.text()).toContain("Paste the IdP");
  // from the URL this time: the IdP's metadata read now; enabled while another is: 409 in words
  const second = await post(jar, "/console/sso/connections", {
    csrf,
    type: "saml",
    metadataUrl: `${idp.url}/metadata`,
  });
  expect(second.status).toBe(303);
  const two = await (await get(jar, "/console/sso")).text();
  const [disabledId] = connectionIds(two, "enable");
  const conflict = await post(jar, `/console/sso/connections/${disabledId}/enable`, { csrf });
  expect(conflict.status).toBe(409);
  expect(await conflict.text()).toContain("Another connection of this tenant is enabled");

  const admin = await signInAs(tenant, tenant.admin.email);
  const read = await (await get(admin.jar, "/console/sso")).text();
  expect(read).toContain(idp.entityId);
  expect(read).not.toContain('action="/console/sso/connections"');
  expect(connectionIds(read, "delete")).toEqual([]);
  expect((await post(admin.jar, `/console/sso/connections/${id}/delete`, { csrf: admin.csrf })).status).toBe(
    403,
  );

  const free = await signedInTenant(app);
  const freeOwner = await signInAs(free, free.owner.email);
  const refused = await post(freeOwner.jar, "/console/sso/connections", {
    csrf: freeOwner.csrf,
    type: "saml",
    metadataXml: idp.metadataXml,
  });
  expect(refused.status).toBe(402);
  expect(await refused.text()).toContain("Not in your plan");
});

test("an owner with a second factor adds a connection after the step-up prompt; the client secret is not carried through it", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const { jar, csrf } = await signInAs(tenant, tenant.owner.email);
  const started = await (await post(jar, "/console/mfa/totp", { csrf })).text();
  const uri = (/<code class="secret">([^<]+)<\/code>/.exec(started)?.[1] ?? "").replaceAll("&amp;", "&");
  const authenticator = URI.parse(uri);
  const code = authenticator.generate({ timestamp: clock.now().getTime() });
  expect((await post(jar, "/console/mfa/totp/confirm", { csrf, code })).status).toBe(200);
  clock.advance(30_000);

  // OIDC: the prompt steps up only (no secret written into it), then the owner types the form again
  const oidc = {
    csrf,
    type: "oidc",
    issuer: peer.issuer,
    clientId: peer.clientId,
    clientSecret: peer.clientSecret,
  };
  const asked = await post(jar, "/console/sso/connections", oidc);
  expect(asked.status).toBe(401);
  const prompt = await asked.text();
  expect(prompt).toContain('action="/console/step-up"');
  expect(prompt).not.toContain(peer.clientSecret);
  const stepUpCode = authenticator.generate({ timestamp: clock.now().getTime() });
  expect((await post(jar, "/console/step-up", { csrf, back: "/console/sso", stepUpCode })).status).toBe(303);
  expect((await post(jar, "/console/sso/connections", oidc)).status).toBe(303);

  // SAML: the pasted metadata is carried through the prompt and the change runs after the code
  // an hour on, the step-up is no longer recent: asked again
  clock.advance(60 * 60_000);
  const saml = { csrf, type: "saml", metadataXml: idp.metadataXml };
  const again = await post(jar, "/console/sso/connections", saml);
  expect(again.status).toBe(401);
  expect(await again.text()).toContain('action="/console/sso/connections"');
  const laterCode = authenticator.generate({ timestamp: clock.now().getTime() });
  expect((await post(jar, "/console/sso/connections", { ...saml, stepUpCode: laterCode })).status).toBe(303);
  const page = await (await get(jar, "/console/sso")).text();
  expect(page).toContain(peer.issuer);
  expect(page).toContain(idp.entityId);
});
