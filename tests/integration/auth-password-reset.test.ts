import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { sendEmailVerification } from "../../src/auth/password-reset.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { bearer, createTenant, createUser, json, loginTokens, PASSWORD } from "../helpers/identity.ts";
import { tokenOf, useMailTestApp } from "../helpers/mailed-links.ts";

/**
 * Password reset and address verification by e-mail, read back from a real SMTP server: the link
 * works once, ends every session, is refused when reused, expired or of another tenant; the forgot
 * endpoint answers the same for every address and is throttled per address.
 */

const clock = new ManualClock(new Date());
const { h, deliverLinks } = useMailTestApp({
  clock,
  settings: { "Authentication:PasswordReset:SendLimit": "2" },
});

const NEW_PASSWORD = "violet-harbour-tangent-42";

const forgot = (body: { email: string; tenant?: string }) =>
  h.request("/api/auth/password/forgot", json(body));

test("reset by e-mail: the link works once, ends every session (token and refresh), and verifies the address", async () => {
  const tenant = await createTenant(h.db);
  const user = await createUser(h.db, tenant.id, { role: "member" });
  const first = await loginTokens(h, { email: user.email, tenant: tenant.code });
  const second = await loginTokens(h, { email: user.email, tenant: tenant.code });
  expect((await h.request("/api/auth/me", bearer(first.accessToken))).status).toBe(200);

  expect((await forgot({ email: user.email.toUpperCase(), tenant: tenant.code })).status).toBe(202);
  const [link] = await deliverLinks(user.email);
  expect(link).toStartWith("https://app.plinth.test/auth/reset-password?token=");
  const token = tokenOf(link ?? "");

  const weak = await h.request("/api/auth/password/reset", json({ token, newPassword: "password1234" }));
  expect(weak.status).toBe(400);
  const reset = await h.request("/api/auth/password/reset", json({ token, newPassword: NEW_PASSWORD }));
  expect(reset.status).toBe(204);

  for (const tokens of [first, second]) {
    expect((await h.request("/api/auth/me", bearer(tokens.accessToken))).status).toBe(401);
    const refreshed = await h.request("/api/auth/refresh", json({ refreshToken: tokens.refreshToken }));
    expect(refreshed.status).toBe(401);
  }
  const old = await h.request(
    "/api/auth/login",
    json({ email: user.email, password: PASSWORD, tenant: tenant.code }),
  );
  expect(old.status).toBe(401);
  await loginTokens(h, { email: user.email, password: NEW_PASSWORD, tenant: tenant.code });

  const reused = await h.request(
    "/api/auth/password/reset",
    json({ token, newPassword: `${NEW_PASSWORD}x` }),
  );
  // a spent link answers as an unknown one: 404, as an invitation's
  expect(reused.status).toBe(404);
  expect(((await reused.json()) as { detail: string }).detail).toBe(
    "The link is invalid, expired or already used.",
  );
  const [row] = await execute<{ email_verified_at: Date | null }>(
    h.db,
    sql`select email_verified_at from users where id = ${user.id}`,
  );
  expect(row?.email_verified_at).not.toBeNull();
  const audit = await execute<{ action: string }>(
    h.db,
    sql`select action from audit_events where target_id = ${user.id} and action like 'auth.password_reset%' order by id`,
  );
  expect(audit.map((a) => a.action)).toEqual(["auth.password_reset_requested", "auth.password_reset"]);
});

test("an unknown address gets the same 202 and no message; the address's window refuses the third request", async () => {
  const tenant = await createTenant(h.db);
  const user = await createUser(h.db, tenant.id, { role: "member" });
  const unknown = `nobody-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const answers = [
    await forgot({ email: unknown, tenant: tenant.code }),
    await forgot({ email: user.email, tenant: tenant.code }),
  ];
  expect(answers.map((r) => r.status)).toEqual([202, 202]);
  await h.deps.pending.settled(5_000);
  const [count] = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from email_messages where recipient = ${unknown}`,
  );
  expect(count?.n).toBe(0);
  // a user of another tenant with that address is no account here either
  const other = await createTenant(h.db);
  expect((await forgot({ email: user.email, tenant: other.code })).status).toBe(202);

  expect((await forgot({ email: user.email, tenant: tenant.code })).status).toBe(202);
  const refused = await forgot({ email: user.email, tenant: tenant.code });
  expect(refused.status).toBe(429);
  expect(refused.headers.get("retry-after")).not.toBeNull();
  expect(refused.headers.get("ratelimit")).toContain('"reset-account"');
  // the unknown address is refused alike once its window is full
  expect((await forgot({ email: unknown, tenant: tenant.code })).status).toBe(202);
  expect((await forgot({ email: unknown, tenant: tenant.code })).status).toBe(429);
  // a newer link replaced the first: only the last one works
  const links = await deliverLinks(user.email);
  expect(links).toHaveLength(2);
  const [older, newer] = links.map(tokenOf);
  expect(
    (await h.request("/api/auth/password/reset", json({ token: older, newPassword: NEW_PASSWORD }))).status,
  ).toBe(404);
  expect(
    (await h.request("/api/auth/password/reset", json({ token: newer, newPassword: NEW_PASSWORD }))).status,
  ).toBe(204);
});

test("an expired link is refused; a link of tenant A is refused on tenant B's host", async () => {
  const tenant = await createTenant(h.db);
  const user = await createUser(h.db, tenant.id, { role: "member" });
  expect((await forgot({ email: user.email, tenant: tenant.code })).status).toBe(202);
  const [link] = await deliverLinks(user.email);
  const token = tokenOf(link ?? "");
  const other = await createTenant(h.db);
  const onOther = await h.request(
    "/api/auth/password/reset",
    json({ token, newPassword: NEW_PASSWORD }, { "x-tenant": other.code }),
  );
  expect(onOther.status).toBe(404);
  clock.advance(30 * 60_000 + 1);
  const expired = await h.request("/api/auth/password/reset", json({ token, newPassword: NEW_PASSWORD }));
  expect(expired.status).toBe(404);
});

test("address verification: the link marks the address verified once; a link sent before a change of address verifies nothing", async () => {
  const tenant = await createTenant(h.db);
  const user = await createUser(h.db, tenant.id, { role: "member" });
  await sendEmailVerification(h.deps, systemCtx("test", tenant.id), { userId: user.id });
  const [link] = await deliverLinks(user.email);
  expect(link).toStartWith("https://app.plinth.test/auth/verify-email?token=");
  const token = tokenOf(link ?? "");
  expect((await h.request("/api/auth/email/verify", json({ token }))).status).toBe(204);
  expect((await h.request("/api/auth/email/verify", json({ token }))).status).toBe(404);
  const verified = async () =>
    (
      await execute<{ v: Date | null }>(
        h.db,
        sql`select email_verified_at as v from users where id = ${user.id}`,
      )
    )[0]?.v;
  expect(await verified()).not.toBeNull();

  await execute(h.db, sql`update users set email_verified_at = null where id = ${user.id}`);
  await sendEmailVerification(h.deps, systemCtx("test", tenant.id), { userId: user.id });
  const [stale] = await deliverLinks(user.email);
  await execute(h.db, sql`update users set email = ${`moved-${user.email}`} where id = ${user.id}`);
  expect((await h.request("/api/auth/email/verify", json({ token: tokenOf(stale ?? "") }))).status).toBe(404);
  expect(await verified()).toBeNull();
});

test("no log line holds a link's token", () => {
  for (const line of h.logs) expect(line).not.toMatch(/token=(?!\[REDACTED\])[A-Za-z0-9_-]{20,}/);
});
