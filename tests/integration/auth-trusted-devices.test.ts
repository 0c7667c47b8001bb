import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { csrfOf, tenantConsole } from "../helpers/console-tenant.ts";
import { Jar } from "../helpers/cookie-jar.ts";
import {
  bearer,
  json,
  newMasterKey,
  PASSWORD,
  type SignedInTenant,
  type SignedInUser,
  signedInTenant,
} from "../helpers/identity.ts";
import { enrolTotp, rfcCode } from "../helpers/mfa.ts";

/** Trusted devices (issue #33 clause 4; docs/auth.md "Trusted devices"): the step skipped, and only then. */

const ORIGIN = "https://app.customer.test";
const clock = new ManualClock(Date.now());
const h = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "trusted-devices-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
  env: { BrowserAuth__AllowedOrigins__0: ORIGIN },
});

const COOKIE = "__Host-plinth_trusted_device";

/** A password sign-in, carrying the trusted-device cookie when given. */
async function signIn(user: { email: string }, tenant: string, cookie?: string, password = PASSWORD) {
  const headers: Record<string, string> = {};
  if (cookie) headers.cookie = `${COOKIE}=${cookie}`;
  const response = await h.request("/api/auth/login", json({ email: user.email, password, tenant }, headers));
  expect(response.status).toBe(200);
  return (await response.json()) as { mfaRequired?: true; mfaToken?: string; accessToken?: string };
}

/** Whether a sign-in with this cookie skipped the step (tokens at once) or was asked for it. */
async function skips(user: { email: string }, tenant: string, cookie: string): Promise<boolean> {
  const body = await signIn(user, tenant, cookie);
  if (body.accessToken) {
    expect(decodeJwt(body.accessToken).amr).toEqual(["pwd"]);
    return true;
  }
  expect(body.mfaRequired).toBe(true);
  return false;
}

/** The user's TOTP secret, enrolled; then a step completed with `trustDevice`: its cookie and tokens. */
async function trust(user: SignedInUser, tenant: string, secret?: Buffer) {
  const key = secret ?? (await enrolTotp(h, clock, user)).secret;
  const step = await signIn(user, tenant);
  expect(step.mfaRequired).toBe(true);
  clock.advance(30_000);
  const done = await h.request(
    "/api/auth/mfa/verify",
    json({ mfaToken: step.mfaToken, code: rfcCode(key, clock.now().getTime()), trustDevice: true }),
  );
  expect(done.status).toBe(200);
  const setCookie = done.headers.get("set-cookie");
  const pair = (await done.json()) as { accessToken: string };
  const value = setCookie?.match(new RegExp(`${COOKIE}=([^;]+)`))?.[1];
  return { secret: key, cookie: value, setCookie, accessToken: pair.accessToken };
}

async function allowed(tenant: SignedInTenant, on = true) {
  const response = await h.request("/api/tenant/security-policy", {
    method: "PUT",
    headers: { authorization: `Bearer ${tenant.owner.accessToken}`, "content-type": "application/json" },
    body: JSON.stringify({ allowTrustedDevices: on }),
  });
  expect(response.status).toBe(200);
  expect(((await response.json()) as { allowTrustedDevices: boolean }).allowTrustedDevices).toBe(on);
}

const revokedReasons = async (userId: string) =>
  (
    await execute<{ reason: string }>(
      h.db,
      sql`select revoked_reason as reason from trusted_devices where user_id = ${userId} and revoked_at is not null order by revoked_at`,
    )
  ).map((row) => row.reason);

test("trusted: the cookie is __Host-, Secure, HttpOnly, Lax, 30 days; the next sign-in skips the step with amr pwd only, and step-up still asks", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  const { cookie, setCookie } = await trust(tenant.member, tenant.code);
  expect(cookie).toBeString();
  expect(setCookie).toContain("Path=/");
  expect(setCookie).toContain("Secure");
  expect(setCookie).toContain("HttpOnly");
  expect(setCookie).toContain("SameSite=Lax");
  expect(setCookie).toContain(`Max-Age=${30 * 86_400}`);
  expect(setCookie).not.toContain("Domain=");

  const body = await signIn(tenant.member, tenant.code, cookie);
  expect(body.mfaRequired).toBeUndefined();
  const token = body.accessToken ?? "";
  // a trusted device is not a second factor
  expect(decodeJwt(token).amr).toEqual(["pwd"]);
  const stepUp = await h.request("/api/auth/mfa/backup-codes", { method: "POST", ...bearer(token) });
  expect(stepUp.status).toBe(401);
  expect(stepUp.headers.get("www-authenticate")).toContain('error="insufficient_user_authentication"');

  // without the cookie, the step as before; the device listed with its last use, audited
  expect(await signIn(tenant.member, tenant.code)).toMatchObject({ mfaRequired: true });
  const list = await h.request("/api/auth/mfa/trusted-devices", bearer(token));
  expect(list.status).toBe(200);
  const { items } = (await list.json()) as { items: { id: string; lastUsedAt: string | null }[] };
  expect(items).toHaveLength(1);
  expect(items[0]?.lastUsedAt).toBe(clock.now().toISOString());
  const audited = await execute<{ action: string }>(
    h.db,
    sql`select action from audit_events where target_id = ${items[0]?.id ?? ""} order by id`,
  );
  expect(audited.map((row) => row.action)).toEqual(["mfa.device_trusted"]);
  // the secret is stored only hashed
  const [row] = await execute<{ secret_hash: string }>(
    h.db,
    sql`select secret_hash from trusted_devices where id = ${items[0]?.id ?? ""}`,
  );
  expect(cookie).not.toContain(row?.secret_hash ?? "-");
});

test("the browser sign-in skips too: the session cookie at once, from an allowed origin", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  const { cookie } = await trust(tenant.admin, tenant.code);
  const response = await h.request(
    "/api/auth/browser/login",
    json(
      { email: tenant.admin.email, password: PASSWORD, tenant: tenant.code },
      { origin: ORIGIN, cookie: `${COOKIE}=${cookie}` },
    ),
  );
  expect(response.status).toBe(200);
  expect(response.headers.get("set-cookie")).toContain("__Host-plinth_session=");
});

test("expiry by the clock: a day past 30 the step is back", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  const { cookie = "" } = await trust(tenant.member, tenant.code);
  clock.advance(29 * 86_400_000);
  expect(await skips(tenant.member, tenant.code, cookie)).toBe(true);
  clock.advance(86_400_000 + 1000);
  expect(await skips(tenant.member, tenant.code, cookie)).toBe(false);
});

test("another user's cookie, another tenant's cookie and a tampered cookie skip nothing", async () => {
  const a = await signedInTenant(h);
  const b = await signedInTenant(h);
  await allowed(a);
  await allowed(b);
  const { cookie = "" } = await trust(a.member, a.code);
  await enrolTotp(h, clock, a.admin);
  await enrolTotp(h, clock, b.member);
  expect(await skips(a.admin, a.code, cookie)).toBe(false);
  expect(await skips(b.member, b.code, cookie)).toBe(false);
  // one character changed, anywhere, and it does not open
  const flipped = `${cookie.slice(0, 20)}${cookie[20] === "A" ? "B" : "A"}${cookie.slice(21)}`;
  expect(await skips(a.member, a.code, flipped)).toBe(false);
  expect(await skips(a.member, a.code, "not-a-sealed-value")).toBe(false);
  // the genuine one still does
  expect(await skips(a.member, a.code, cookie)).toBe(true);
});

test("the policy: off by default (trustDevice ignored, no cookie); switched off, every device is revoked and stays so", async () => {
  const tenant = await signedInTenant(h);
  const policy = await h.request("/api/tenant/security-policy", bearer(tenant.owner.accessToken));
  expect(((await policy.json()) as { allowTrustedDevices: boolean }).allowTrustedDevices).toBe(false);
  const ignored = await trust(tenant.member, tenant.code);
  expect(ignored.setCookie).toBeNull();

  await allowed(tenant);
  const { cookie = "" } = await trust(tenant.member, tenant.code, ignored.secret);
  expect(await skips(tenant.member, tenant.code, cookie)).toBe(true);
  await allowed(tenant, false);
  expect(await skips(tenant.member, tenant.code, cookie)).toBe(false);
  expect(await revokedReasons(tenant.member.id)).toEqual(["trusted devices switched off"]);
  await allowed(tenant, true);
  expect(await skips(tenant.member, tenant.code, cookie)).toBe(false);
});

test("while the policy is off a device is ignored even unrevoked (the column switched directly)", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  const { cookie = "" } = await trust(tenant.member, tenant.code);
  await execute(h.db, sql`update tenants set allow_trusted_devices = false where id = ${tenant.id}`);
  expect(await skips(tenant.member, tenant.code, cookie)).toBe(false);
  await execute(h.db, sql`update tenants set allow_trusted_devices = true where id = ${tenant.id}`);
  expect(await skips(tenant.member, tenant.code, cookie)).toBe(true);
});

test("the list pages newest first: limit and an opaque cursor, nextCursor null on the last page", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  const first = await trust(tenant.member, tenant.code);
  clock.advance(1_000);
  const second = await trust(tenant.member, tenant.code, first.secret);
  const page = async (query: string) => {
    const response = await h.request(`/api/auth/mfa/trusted-devices${query}`, bearer(second.accessToken));
    expect(response.status).toBe(200);
    return (await response.json()) as {
      items: { id: string; createdAt: string }[];
      nextCursor: string | null;
    };
  };
  const one = await page("?limit=1");
  expect(one.items).toHaveLength(1);
  expect(one.nextCursor).toEqual(expect.any(String));
  const two = await page(`?limit=1&cursor=${encodeURIComponent(one.nextCursor ?? "")}`);
  expect(two.items).toHaveLength(1);
  expect(two.items[0]?.id).not.toBe(one.items[0]?.id);
  expect(Date.parse(two.items[0]?.createdAt ?? "")).toBeLessThan(Date.parse(one.items[0]?.createdAt ?? ""));
  expect(two.nextCursor).toBeNull();
  const all = await page("");
  expect(all.items.map((d) => d.id)).toEqual([one.items[0]?.id ?? "", two.items[0]?.id ?? ""]);
  expect(
    (await h.request("/api/auth/mfa/trusted-devices?cursor=nonsense", bearer(second.accessToken))).status,
  ).toBe(400);
});

test("revoked by its user (DELETE), by signing out everywhere, and by an administrator ending the member's sessions", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  const first = await trust(tenant.member, tenant.code);
  const [device] = (
    (await (await h.request("/api/auth/mfa/trusted-devices", bearer(first.accessToken))).json()) as {
      items: { id: string }[];
    }
  ).items;
  const removed = await h.request(`/api/auth/mfa/trusted-devices/${device?.id}`, {
    method: "DELETE",
    ...bearer(first.accessToken),
  });
  expect(removed.status).toBe(204);
  expect(await skips(tenant.member, tenant.code, first.cookie ?? "")).toBe(false);
  const again = await h.request(`/api/auth/mfa/trusted-devices/${device?.id}`, {
    method: "DELETE",
    ...bearer(first.accessToken),
  });
  expect(again.status).toBe(404);

  const second = await trust(tenant.member, tenant.code, first.secret);
  const everywhere = await h.request("/api/auth/sessions", {
    method: "DELETE",
    ...bearer(second.accessToken),
  });
  expect(everywhere.status).toBe(204);
  expect(await skips(tenant.member, tenant.code, second.cookie ?? "")).toBe(false);

  const third = await trust(tenant.member, tenant.code, first.secret);
  const ended = await h.request(`/api/tenant/users/${tenant.member.id}/sessions`, {
    method: "DELETE",
    ...bearer(tenant.owner.accessToken),
  });
  expect(ended.status).toBe(204);
  expect(await skips(tenant.member, tenant.code, third.cookie ?? "")).toBe(false);
  expect(await revokedReasons(tenant.member.id)).toEqual([
    "revoked by its user",
    "ended by its user (all others)",
    "ended by a tenant administrator",
  ]);
});

test("revoked by a factor reset and by a password change", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  const first = await trust(tenant.member, tenant.code);
  const reset = await h.request(`/api/tenant/users/${tenant.member.id}/mfa`, {
    method: "DELETE",
    ...bearer(tenant.owner.accessToken),
  });
  expect(reset.status).toBe(200);
  // enrolled again: the old browser takes the step like any other
  const second = await trust(tenant.member, tenant.code);
  expect(await skips(tenant.member, tenant.code, first.cookie ?? "")).toBe(false);
  expect(await skips(tenant.member, tenant.code, second.cookie ?? "")).toBe(true);

  const NEW_PASSWORD = "a fresh and long passphrase 91";
  const changed = await h.request(
    "/api/auth/password",
    json(
      { currentPassword: PASSWORD, newPassword: NEW_PASSWORD },
      { authorization: `Bearer ${second.accessToken}` },
    ),
  );
  expect(changed.status).toBe(200);
  const body = await signIn(tenant.member, tenant.code, second.cookie, NEW_PASSWORD);
  expect(body.mfaRequired).toBe(true);
  expect(await revokedReasons(tenant.member.id)).toEqual(["second factors reset", "password changed"]);
});

test("revoked when the user is disabled or removed", async () => {
  const tenant = await signedInTenant(h);
  await allowed(tenant);
  await trust(tenant.member, tenant.code);
  await trust(tenant.admin, tenant.code);
  const disabled = await h.request(`/api/tenant/users/${tenant.member.id}/disable`, {
    method: "POST",
    ...bearer(tenant.owner.accessToken),
  });
  expect(disabled.status).toBe(204);
  expect(await revokedReasons(tenant.member.id)).toEqual(["user disabled"]);
  const audited = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from audit_events where tenant_id = ${tenant.id} and action = 'mfa.trusted_device_revoked'`,
  );
  expect(audited[0]?.n).toBe(1);
  const removed = await h.request(`/api/tenant/users/${tenant.admin.id}`, {
    method: "DELETE",
    ...bearer(tenant.owner.accessToken),
  });
  expect(removed.status).toBe(204);
  const after = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from audit_events where tenant_id = ${tenant.id} and action = 'mfa.trusted_device_revoked' and details->>'reason' = 'user removed'`,
  );
  expect(after[0]?.n).toBe(1);
});

test("tenant A cannot list or revoke tenant B's devices", async () => {
  const a = await signedInTenant(h);
  const b = await signedInTenant(h);
  await allowed(a);
  await allowed(b);
  const mine = await trust(a.member, a.code);
  const theirs = await trust(b.member, b.code);
  const listB = (await (
    await h.request("/api/auth/mfa/trusted-devices", bearer(theirs.accessToken))
  ).json()) as {
    items: { id: string }[];
  };
  const bDevice = listB.items[0]?.id ?? "";
  const listA = (await (
    await h.request("/api/auth/mfa/trusted-devices", bearer(mine.accessToken))
  ).json()) as {
    items: { id: string }[];
  };
  expect(listA.items.map((d) => d.id)).not.toContain(bDevice);
  expect(listA.items).toHaveLength(1);
  for (const token of [mine.accessToken, a.owner.accessToken, b.admin.accessToken]) {
    const refused = await h.request(`/api/auth/mfa/trusted-devices/${bDevice}`, {
      method: "DELETE",
      ...bearer(token),
    });
    expect(refused.status).toBe(404);
  }
  expect(await skips(b.member, b.code, theirs.cookie ?? "")).toBe(true);
});

test("the console: the step's 'trust this browser' sets the cookie, the next console sign-in skips the step, /console/mfa lists and revokes it; the policy page switches it", async () => {
  const tenant = await signedInTenant(h);
  const { post, get } = tenantConsole(h, ORIGIN);
  const { secret } = await enrolTotp(h, clock, tenant.admin);
  // the policy through the console's form (the owner has no factor: no step-up)
  const owner = await tenantConsole(h, ORIGIN).signInAs(tenant, tenant.owner.email);
  const policyPage = await (await get(owner.jar, "/console/security-policy")).text();
  expect(policyPage).toContain('name="allowTrustedDevices"');
  const saved = await post(owner.jar, "/console/security-policy", {
    csrf: csrfOf(policyPage),
    requireMfa: "off",
    enrolmentGraceDays: "7",
    allowTrustedDevices: "on",
  });
  expect(saved.status).toBe(303);

  const jar = new Jar();
  const step = await post(jar, "/console/sign-in", {
    email: tenant.admin.email,
    password: PASSWORD,
    tenant: tenant.code,
  });
  const stepPage = await step.text();
  expect(stepPage).toContain('name="trustDevice"');
  const mfaToken = /name="mfaToken" value="([^"]+)"/.exec(stepPage)?.[1] ?? "";
  const done = jar.take(
    await post(jar, "/console/sign-in/mfa", {
      mfaToken,
      code: rfcCode(secret, clock.now().getTime()),
      trustDevice: "on",
    }),
  );
  expect(done.status).toBe(303);
  expect(jar.cookies.has(COOKIE)).toBe(true);

  // a new console sign-in in the same browser (its session cookie gone): no step
  jar.cookies.delete("__Host-plinth_session");
  const again = jar.take(
    await post(jar, "/console/sign-in", {
      email: tenant.admin.email,
      password: PASSWORD,
      tenant: tenant.code,
    }),
  );
  expect(again.status).toBe(303);
  const mfaPage = await (await get(jar, "/console/mfa")).text();
  const id = /\/console\/mfa\/trusted-devices\/([0-9a-f-]{36})\/revoke/.exec(mfaPage)?.[1] ?? "";
  expect(id).not.toBe("");
  const revoked = await post(jar, `/console/mfa/trusted-devices/${id}/revoke`, { csrf: csrfOf(mfaPage) });
  expect(revoked.status).toBe(303);
  const after = await (await get(jar, "/console/mfa?untrusted")).text();
  expect(after).toContain("No trusted devices.");
  expect(after).toContain("Device revoked");
  expect(await skips(tenant.admin, tenant.code, jar.cookies.get(COOKIE) ?? "")).toBe(false);
});
