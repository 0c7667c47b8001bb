import { expect, test } from "bun:test";
import { URI } from "otpauth";
import { ManualClock } from "../../src/clock.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { tenantConsole } from "../helpers/console-tenant.ts";
import { Jar } from "../helpers/cookie-jar.ts";
import { newMasterKey, PASSWORD, signedInTenant } from "../helpers/identity.ts";

// Issue #33 point 7 and #34 point 5: a tenant's owners and admins in the console (signed in with
// their organisation code): the security policy with the step-up prompt, and single sign-on
// (verified e-mail domains, enforcement, SCIM tokens) through the API's own functions; 402 in words.

const ORIGIN = "https://ops.plinth.test";
const clock = new ManualClock(Date.now());
const app = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "console-tenant-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
  env: { BrowserAuth__AllowedOrigins__0: ORIGIN },
});

const { post, get, signInAs } = tenantConsole(app, ORIGIN);
const api = (token: string, path: string, init: RequestInit = {}) =>
  app.request(path, {
    ...init,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
  });

function expectNoInlineScript(page: string) {
  expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  expect(page).not.toMatch(/\son[a-z]+="/);
}

test("a tenant's owner signs in with the organisation code and sees the tenant's pages only; a member and a wrong code do not", async () => {
  const tenant = await signedInTenant(app);
  const { jar } = await signInAs(tenant, tenant.owner.email);
  const home = await get(jar, "/console");
  expect(home.status).toBe(303);
  expect(home.headers.get("location")).toBe("/console/security-policy");
  const page = await (await get(jar, "/console/security-policy")).text();
  expect(page).toContain('href="/console/sso"');
  expect(page).toContain('href="/console/mfa"');
  expect(page).not.toContain('href="/console/jobs"');
  expect(page).toContain(tenant.code);
  expectNoInlineScript(page);
  for (const platformPage of ["/console/jobs", "/console/tenants", "/console/audit"])
    expect((await get(jar, platformPage)).status).toBe(404);

  const member = await signInAs(tenant, tenant.member.email);
  expect((await get(member.jar, "/console/security-policy")).status).toBe(403);
  const wrong = await post(new Jar(), "/console/sign-in", {
    email: tenant.owner.email,
    password: PASSWORD,
    tenant: "no-such-tenant",
  });
  expect(wrong.status).toBe(401);
});

test("the security policy: saved through the API's function, after the step-up prompt for an owner with a factor", async () => {
  const tenant = await signedInTenant(app);
  const { jar, csrf } = await signInAs(tenant, tenant.owner.email);
  // the owner enrols an authenticator app on the console's own-account page
  const started = await (await post(jar, "/console/mfa/totp", { csrf })).text();
  const uri = (/<code class="secret">([^<]+)<\/code>/.exec(started)?.[1] ?? "").replaceAll("&amp;", "&");
  const authenticator = URI.parse(uri);
  const code = authenticator.generate({ timestamp: clock.now().getTime() });
  expect((await post(jar, "/console/mfa/totp/confirm", { csrf, code })).status).toBe(200);

  const change = { csrf, requireMfa: "everyone", enrolmentGraceDays: "14" };
  const asked = await post(jar, "/console/security-policy", change);
  expect(asked.status).toBe(401);
  const prompt = await asked.text();
  expect(prompt).toContain('action="/console/security-policy"');
  expect(prompt).toContain('name="requireMfa" value="everyone"');
  clock.advance(30_000);
  const stepUpCode = authenticator.generate({ timestamp: clock.now().getTime() });
  const saved = await post(jar, "/console/security-policy", { ...change, stepUpCode });
  expect(saved.status).toBe(303);
  expect(saved.headers.get("location")).toBe("/console/security-policy?saved");
  const policy = await (await api(tenant.admin.accessToken, "/api/tenant/security-policy")).json();
  expect(policy).toMatchObject({ requireMfa: "everyone", enrolmentGraceDays: 14 });
  const page = await (await get(jar, "/console/security-policy?saved")).text();
  expect(page).toContain("Policy saved.");
  expect(page).toMatch(/value="everyone" checked/);
  // a value the API refuses is refused here too
  expect(
    (await post(jar, "/console/security-policy", { csrf, requireMfa: "always", enrolmentGraceDays: "1" }))
      .status,
  ).toBe(400);
});

test("single sign-on: a free plan reads as words; on the enterprise plan an owner adds a domain, enforces SSO and manages SCIM tokens", async () => {
  const free = await signedInTenant(app);
  const freeOwner = await signInAs(free, free.owner.email);
  const gated = await (await get(freeOwner.jar, "/console/sso")).text();
  expect(gated).toContain("not in your plan");
  expect(gated).not.toContain('action="/console/sso/domains"');
  const refused = await post(freeOwner.jar, "/console/sso/domains", {
    csrf: freeOwner.csrf,
    domain: "corp.example",
  });
  expect(refused.status).toBe(402);
  expect(await refused.text()).toContain("Not in your plan");

  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const { jar, csrf } = await signInAs(tenant, tenant.owner.email);
  const domain = `corp-${crypto.randomUUID().slice(0, 8)}x.example`;
  const added = await post(jar, "/console/sso/domains", { csrf, domain });
  expect(added.status).toBe(303);
  const page = await (await get(jar, "/console/sso?added")).text();
  expectNoInlineScript(page);
  expect(page).toContain(domain);
  const listed = (await (await api(tenant.owner.accessToken, "/api/tenant/email-domains")).json()) as {
    items: { id: string; verification: { name: string; value: string } }[];
  };
  const [claim] = listed.items;
  expect(page).toContain(claim?.verification.name ?? "missing");
  expect(page).toContain(claim?.verification.value ?? "missing");
  expect((await post(jar, `/console/sso/domains/${claim?.id}/delete`, { csrf })).status).toBe(303);
  expect(
    ((await (await api(tenant.owner.accessToken, "/api/tenant/email-domains")).json()) as { items: [] })
      .items,
  ).toEqual([]);

  expect((await post(jar, "/console/sso/enforcement", { csrf, enforced: "true" })).status).toBe(303);
  expect(await (await get(jar, "/console/sso?enforced")).text()).toContain("Stop enforcing SSO");

  const created = await post(jar, "/console/sso/scim-tokens", { csrf, name: "Okta" });
  expect(created.status).toBe(200);
  const token = /<code class="secret">([^<]+)<\/code>/.exec(await created.text())?.[1] ?? "";
  const scim = (t: string) => app.request("/scim/v2/Users", { headers: { authorization: `Bearer ${t}` } });
  expect((await scim(token)).status).toBe(200);
  const after = await (await get(jar, "/console/sso")).text();
  expect(after).not.toContain(token);
  const id = /\/console\/sso\/scim-tokens\/([0-9a-f-]{36})\/rotate/.exec(after)?.[1] ?? "";
  const rotated = await post(jar, `/console/sso/scim-tokens/${id}/rotate`, { csrf });
  const fresh = /<code class="secret">([^<]+)<\/code>/.exec(await rotated.text())?.[1] ?? "";
  expect((await scim(token)).status).toBe(401);
  expect((await scim(fresh)).status).toBe(200);
  const newId = /\/console\/sso\/scim-tokens\/([0-9a-f-]{36})\/revoke/.exec(
    await (await get(jar, "/console/sso")).text(),
  )?.[1];
  expect((await post(jar, `/console/sso/scim-tokens/${newId}/revoke`, { csrf })).status).toBe(303);
  expect((await scim(fresh)).status).toBe(401);

  // an admin reads, changes nothing; another tenant's domain id is 404
  const admin = await signInAs(tenant, tenant.admin.email);
  const read = await (await get(admin.jar, "/console/sso")).text();
  expect(read).not.toContain('action="/console/sso/domains"');
  expect((await post(admin.jar, "/console/sso/domains", { csrf: admin.csrf, domain })).status).toBe(403);
  const other = await signedInTenant(app, { plan: "enterprise" });
  const theirs = (await (
    await api(other.owner.accessToken, "/api/tenant/email-domains", {
      method: "POST",
      body: JSON.stringify({ domain: `o-${crypto.randomUUID().slice(0, 8)}x.example` }),
    })
  ).json()) as { id: string };
  expect((await post(jar, `/console/sso/domains/${theirs.id}/delete`, { csrf })).status).toBe(404);
});

test("a console sign-in after the clock went eleven minutes forward and back: signed in, not 429 until the clock catches up", async () => {
  const tenant = await signedInTenant(app);
  const start = clock.now();
  try {
    // a sign-in while the clock reads eleven minutes ahead: the rate limits' buckets are stamped then
    clock.advance(11 * 60_000);
    const ahead = await signInAs(tenant, tenant.owner.email);
    expect((await get(ahead.jar, "/console/security-policy")).status).toBe(200);
  } finally {
    clock.set(start);
  }
  // the clock put back: the next sign-in is not refused for the eleven minutes until it catches up
  const jar = new Jar();
  const next = jar.take(
    await post(jar, "/console/sign-in", {
      email: tenant.owner.email,
      password: PASSWORD,
      tenant: tenant.code,
    }),
  );
  expect(next.status).toBe(303);
  expect(next.headers.get("location")).toBe("/console");
  expect((await get(jar, "/console/security-policy")).status).toBe(200);
});
