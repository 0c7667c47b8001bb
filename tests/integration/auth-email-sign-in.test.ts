import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import {
  bearer,
  createUser,
  json,
  newMasterKey,
  type SignedInTenant,
  signedInPlatformAdmin,
  signedInTenant,
} from "../helpers/identity.ts";
import { linkIn, tokenOf, useMailTestApp } from "../helpers/mailed-links.ts";
import { enrolTotp, rfcCode } from "../helpers/mfa.ts";

/**
 * Sign-in by e-mail code or link (a tenant setting), read back from a real SMTP server: off by
 * default; the code and the link work once and spend each other; expired ones fail; the start
 * answers 202 alike for every address; the windows refuse per address and tenant.
 */

const clock = new ManualClock(new Date());
const ORIGIN = "https://app.plinth.test";
const { h, deliverTexts } = useMailTestApp({
  clock,
  settings: {
    "BrowserAuth:AllowedOrigins:0": ORIGIN,
    "Security:TenantSecrets:KeyId": "email-sign-in-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
});

const start = (body: { email: string; tenant?: string }, peer?: string) =>
  h.request("/api/auth/email/code", json(body), peer);
const verify = (body: { email: string; code: string; tenant?: string }, peer?: string) =>
  h.request("/api/auth/email/code/verify", json(body), peer);
const followLink = (token: string, headers: Record<string, string> = {}) =>
  h.request("/api/auth/email/link", json({ token }, headers));

const settings = (tenant: SignedInTenant, change: Record<string, boolean>) =>
  h.request("/api/tenant/settings", {
    method: "PATCH",
    headers: { ...tenant.owner.headers, "content-type": "application/json" },
    body: JSON.stringify(change),
  });

/** The code and the link token of the one message sent to `email`. */
async function mailed(email: string): Promise<{ code: string; token: string }> {
  const texts = await deliverTexts(email);
  expect(texts).toHaveLength(1);
  const text = texts[0] ?? "";
  const code = /\b(\d{6})\b/.exec(text)?.[1] ?? "";
  expect(code).toMatch(/^\d{6}$/);
  const link = linkIn(text);
  expect(link).toStartWith("https://app.plinth.test/auth/sign-in/link?token=");
  return { code, token: tokenOf(link) };
}

const pending = async (email: string) =>
  (
    await execute<{ n: number }>(
      h.db,
      sql`select count(*)::int as n from email_messages where recipient = ${email}`,
    )
  )[0]?.n;

test("off by default: 202 and no message; the owner turns it on, an admin may only read it", async () => {
  const tenant = await signedInTenant(h);
  const email = tenant.member.email;
  expect((await start({ email, tenant: tenant.code })).status).toBe(202);
  await h.deps.pending.settled(5_000);
  expect(await pending(email)).toBe(0);

  const read = await h.request("/api/tenant/settings", bearer(tenant.admin.accessToken));
  expect(read.status).toBe(200);
  expect(await read.json()).toEqual({ privateIdentities: false, emailSignIn: false });
  const byAdmin = await h.request("/api/tenant/settings", {
    method: "PATCH",
    headers: { ...tenant.admin.headers, "content-type": "application/json" },
    body: JSON.stringify({ emailSignIn: true }),
  });
  expect(byAdmin.status).toBe(403);
  const on = await settings(tenant, { emailSignIn: true });
  expect(on.status).toBe(200);
  expect(await on.json()).toEqual({ privateIdentities: false, emailSignIn: true });
  const [audit] = await execute<{ details: { changed: string[]; emailSignIn: boolean } }>(
    h.db,
    sql`select details from audit_events where tenant_id = ${tenant.id} and action = 'tenant.settings_changed'`,
  );
  expect(audit?.details).toMatchObject({ changed: ["emailSignIn"], emailSignIn: true });

  expect((await start({ email, tenant: tenant.code })).status).toBe(202);
  const { code } = await mailed(email);
  const signedIn = await verify({ email, code, tenant: tenant.code });
  expect(signedIn.status).toBe(200);
  const pair = (await signedIn.json()) as { accessToken: string };
  const me = await h.request("/api/auth/me", bearer(pair.accessToken));
  expect(((await me.json()) as { user: { email: string } }).user.email).toBe(email);
});

test("the code works once and spends the link; the link works once and spends the code", async () => {
  const tenant = await signedInTenant(h);
  expect((await settings(tenant, { emailSignIn: true })).status).toBe(200);
  const email = tenant.member.email;

  expect((await start({ email: email.toUpperCase(), tenant: tenant.code })).status).toBe(202);
  const first = await mailed(email);
  expect((await verify({ email, code: first.code, tenant: tenant.code })).status).toBe(200);
  expect((await verify({ email, code: first.code, tenant: tenant.code })).status).toBe(401);
  const spentLink = await followLink(first.token);
  expect(spentLink.status).toBe(404);

  expect((await start({ email, tenant: tenant.code })).status).toBe(202);
  const second = await mailed(email);
  // a link of this tenant is unknown on another tenant's requests
  const other = await signedInTenant(h);
  expect((await followLink(second.token, { "x-tenant": other.code })).status).toBe(404);
  const viaLink = await followLink(second.token);
  expect(viaLink.status).toBe(200);
  const pair = (await viaLink.json()) as { accessToken: string };
  const me = (await (await h.request("/api/auth/me", bearer(pair.accessToken))).json()) as {
    tenant: { id: string };
  };
  expect(me.tenant.id).toBe(tenant.id);
  expect((await followLink(second.token)).status).toBe(404);
  expect((await verify({ email, code: second.code, tenant: tenant.code })).status).toBe(401);

  const methods = await execute<{ method: string }>(
    h.db,
    sql`select details->>'method' as method from audit_events
        where tenant_id = ${tenant.id} and action = 'auth.sign_in' and outcome = 'success'
          and details->>'method' like 'email%' order by id`,
  );
  expect(methods.map((m) => m.method)).toEqual(["email_code", "email_link"]);
  // the message proved the address
  const [row] = await execute<{ verified: boolean }>(
    h.db,
    sql`select email_verified_at is not null as verified from users where id = ${tenant.member.id}`,
  );
  expect(row?.verified).toBe(true);
  // stored hashed: neither the code nor the link's token is in the table
  const stored = await execute<{ code_hash: string; link_hash: string }>(
    h.db,
    sql`select code_hash, link_hash from email_sign_in_codes where email = ${email}`,
  );
  for (const r of stored) {
    expect(r.code_hash).not.toContain(second.code);
    expect(r.link_hash).not.toBe(second.token);
  }
});

test("an expired code and link fail; turning the setting off makes an open one useless", async () => {
  const tenant = await signedInTenant(h);
  expect((await settings(tenant, { emailSignIn: true })).status).toBe(200);
  const email = tenant.member.email;
  expect((await start({ email, tenant: tenant.code })).status).toBe(202);
  const old = await mailed(email);
  clock.advance(601_000);
  expect((await verify({ email, code: old.code, tenant: tenant.code })).status).toBe(401);
  expect((await followLink(old.token)).status).toBe(404);

  expect((await start({ email, tenant: tenant.code })).status).toBe(202);
  const fresh = await mailed(email);
  expect((await settings(tenant, { emailSignIn: false })).status).toBe(200);
  expect((await verify({ email, code: fresh.code, tenant: tenant.code })).status).toBe(401);
});

test("the same 202 for an unknown address, a member of another tenant and an unknown tenant code; no message", async () => {
  const tenant = await signedInTenant(h);
  const elsewhere = await signedInTenant(h);
  expect((await settings(tenant, { emailSignIn: true })).status).toBe(200);
  expect((await settings(elsewhere, { emailSignIn: true })).status).toBe(200);
  const unknown = `nobody-${crypto.randomUUID().slice(0, 8)}@example.com`;
  for (const body of [
    { email: unknown, tenant: tenant.code },
    { email: elsewhere.member.email, tenant: tenant.code },
    { email: tenant.member.email, tenant: `zz${crypto.randomUUID().slice(0, 8)}` },
  ]) {
    const answer = await start(body);
    expect(answer.status).toBe(202);
    expect(await answer.text()).toBe("");
  }
  await h.deps.pending.settled(5_000);
  for (const email of [unknown, elsewhere.member.email, tenant.member.email])
    expect(await pending(email)).toBe(0);
  // a guess for an address with no code is the same 401 as a wrong code
  expect((await verify({ email: unknown, code: "123456", tenant: tenant.code })).status).toBe(401);
});

test("the windows: the fourth message to one address is 429 naming its window; wrong codes are capped per address", async () => {
  const tenant = await signedInTenant(h);
  expect((await settings(tenant, { emailSignIn: true })).status).toBe(200);
  const email = (await createUser(h.db, tenant.id, { role: "member" })).email;
  for (let i = 0; i < 3; i++)
    expect((await start({ email, tenant: tenant.code }, "198.51.100.21")).status).toBe(202);
  const refused = await start({ email, tenant: tenant.code }, "198.51.100.22");
  expect(refused.status).toBe(429);
  expect(refused.headers.get("retry-after")).not.toBeNull();
  expect(refused.headers.get("ratelimit")).toContain("email-code-send-account");
  // the same address in another tenant is another window
  const other = await signedInTenant(h);
  expect((await start({ email, tenant: other.code }, "198.51.100.22")).status).toBe(202);

  await h.deps.pending.settled(5_000);
  for (let i = 0; i < 5; i++)
    expect((await verify({ email, code: "000000", tenant: tenant.code }, "198.51.100.23")).status).toBe(401);
  const capped = await verify({ email, code: "000000", tenant: tenant.code }, "198.51.100.24");
  expect(capped.status).toBe(429);
  expect(capped.headers.get("ratelimit")).toContain("email-code-verify-account");
});

test("platform admins read and change a tenant's settings; an unknown setting is 400, an unknown tenant 404", async () => {
  const tenant = await signedInTenant(h);
  const admin = await signedInPlatformAdmin(h);
  const path = `/api/admin/tenants/${tenant.id}/settings`;
  const patch = (body: unknown, p = path) =>
    h.request(p, {
      method: "PATCH",
      headers: { authorization: `Bearer ${admin.accessToken}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const changed = await patch({ privateIdentities: true });
  expect(changed.status).toBe(200);
  expect(await changed.json()).toEqual({ privateIdentities: true, emailSignIn: false });
  const read = await h.request("/api/tenant/settings", bearer(tenant.owner.accessToken));
  expect(await read.json()).toEqual({ privateIdentities: true, emailSignIn: false });
  expect((await patch({ private: true })).status).toBe(400);
  expect(
    (await patch({ emailSignIn: true }, `/api/admin/tenants/${crypto.randomUUID()}/settings`)).status,
  ).toBe(404);
});

test("a browser signs in with the code or the link from an allowed origin only: the session cookie", async () => {
  const tenant = await signedInTenant(h);
  expect((await settings(tenant, { emailSignIn: true })).status).toBe(200);
  const email = tenant.member.email;
  const browser = (path: string, body: unknown, origin = ORIGIN) => h.request(path, json(body, { origin }));
  const cookieOf = (response: Response) =>
    (response.headers.getSetCookie().find((line) => line.startsWith("__Host-plinth_session=")) ?? "").split(
      ";",
    )[0] ?? "";

  expect((await start({ email, tenant: tenant.code })).status).toBe(202);
  const { code, token } = await mailed(email);
  const elsewhere = await browser(
    "/api/auth/browser/email/code/verify",
    { email, code, tenant: tenant.code },
    "https://evil.example",
  );
  expect(elsewhere.status).toBe(403);
  const signedIn = await browser("/api/auth/browser/email/code/verify", { email, code, tenant: tenant.code });
  expect(signedIn.status).toBe(200);
  expect(Object.keys((await signedIn.json()) as object).sort()).toEqual([
    "csrfToken",
    "expiresIn",
    "passwordChangeRequired",
  ]);
  const cookie = cookieOf(signedIn);
  expect(cookie).not.toBe("");
  const me = await h.request("/api/auth/me", { headers: { cookie, origin: ORIGIN } });
  expect(me.status).toBe(200);
  // the link of the same message was spent with the code
  expect((await browser("/api/auth/browser/email/link", { token })).status).toBe(404);

  expect((await start({ email, tenant: tenant.code })).status).toBe(202);
  const second = await mailed(email);
  const viaLink = await browser("/api/auth/browser/email/link", { token: second.token });
  expect(viaLink.status).toBe(200);
  expect(cookieOf(viaLink)).not.toBe("");
});

test("a code sign-in of a user with a second factor takes the step, and skips it from a browser trusted there (amr otp only)", async () => {
  const tenant = await signedInTenant(h);
  expect((await settings(tenant, { emailSignIn: true })).status).toBe(200);
  const policy = await h.request("/api/tenant/security-policy", {
    method: "PUT",
    headers: { ...tenant.owner.headers, "content-type": "application/json" },
    body: JSON.stringify({ allowTrustedDevices: true }),
  });
  expect(policy.status).toBe(200);
  const email = tenant.member.email;
  const { secret } = await enrolTotp(h, clock, tenant.member);
  const signIn = async (cookie?: string) => {
    expect((await start({ email, tenant: tenant.code })).status).toBe(202);
    const { code } = await mailed(email);
    await execute(h.db, sql`delete from email_messages where recipient = ${email}`);
    const headers: Record<string, string> = cookie
      ? { cookie: `__Host-plinth_trusted_device=${cookie}` }
      : {};
    const answer = await h.request(
      "/api/auth/email/code/verify",
      json({ email, code, tenant: tenant.code }, headers),
    );
    expect(answer.status).toBe(200);
    return (await answer.json()) as { mfaRequired?: true; mfaToken?: string; accessToken?: string };
  };
  const step = await signIn();
  expect(step.mfaRequired).toBe(true);
  const done = await h.request(
    "/api/auth/mfa/verify",
    json({ mfaToken: step.mfaToken, code: rfcCode(secret, clock.now().getTime()), trustDevice: true }),
  );
  expect(done.status).toBe(200);
  const cookie = /__Host-plinth_trusted_device=([^;]+)/.exec(done.headers.get("set-cookie") ?? "")?.[1];
  expect(cookie).toBeString();
  const skipped = await signIn(cookie);
  expect(skipped.mfaRequired).toBeUndefined();
  expect(decodeJwt(skipped.accessToken ?? "").amr).toEqual(["otp"]);
});
