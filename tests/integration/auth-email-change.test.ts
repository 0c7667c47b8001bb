import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import {
  bearer,
  createUser,
  json,
  login,
  loginTokens,
  PASSWORD,
  signedInTenant,
} from "../helpers/identity.ts";
import { linkIn, tokenOf, useMailTestApp } from "../helpers/mailed-links.ts";

/**
 * Issue #32: a change of address, read back from a real SMTP server. The address changes only when
 * the link mailed to the new one is followed (single-use, short-lived, stored hashed); the current
 * address gets a notice at once; the answer is the same whether or not the new address is taken.
 */

const clock = new ManualClock(new Date());
const { h, deliverTexts } = useMailTestApp({ clock });

const address = () => `new-${crypto.randomUUID().slice(0, 8)}@example.com`;
const change = (accessToken: string, body: { newEmail: string; currentPassword: string }) =>
  h.request("/api/auth/email/change", json(body, { authorization: `Bearer ${accessToken}` }));
const confirm = (token: string) => h.request("/api/auth/email/change/confirm", json({ token }));
const emailOf = async (id: string) =>
  (
    await execute<{ email: string; verified: boolean }>(
      h.db,
      sql`select email, email_verified_at is not null as verified from users where id = ${id}`,
    )
  )[0];

test("the link to the new address changes it (verified) once; the old address is told at once", async () => {
  const tenant = await signedInTenant(h);
  const member = tenant.member;
  const newEmail = address();
  expect((await change(member.accessToken, { newEmail, currentPassword: "wrong-password-1" })).status).toBe(
    401,
  );
  const asked = await change(member.accessToken, {
    newEmail: newEmail.toUpperCase(),
    currentPassword: PASSWORD,
  });
  expect(asked.status).toBe(202);

  const [notice] = await deliverTexts(member.email);
  expect(notice).toContain(`n***@example.com`);
  expect(notice).not.toContain("token=");
  const [message] = await deliverTexts(newEmail);
  const link = linkIn(message ?? "");
  expect(link).toStartWith("https://app.plinth.test/auth/confirm-email-change?token=");
  // nothing changed yet: the old address still signs in, the new one does not
  expect(await emailOf(member.id)).toMatchObject({ email: member.email });
  expect((await login(h, { email: newEmail, tenant: tenant.code })).status).toBe(401);

  expect((await confirm(tokenOf(link))).status).toBe(204);
  expect(await emailOf(member.id)).toEqual({ email: newEmail, verified: true });
  expect((await confirm(tokenOf(link))).status).toBe(404);
  await loginTokens(h, { email: newEmail, tenant: tenant.code });
  expect((await login(h, { email: member.email, tenant: tenant.code })).status).toBe(401);
  const me = await h.request("/api/auth/me", bearer(member.accessToken));
  expect(((await me.json()) as { user: { email: string } }).user.email).toBe(newEmail);
  const audit = await execute<{ action: string; from: string | null; to: string | null }>(
    h.db,
    sql`select action, details->>'from' as from, details->>'to' as to from audit_events
        where target_id = ${member.id} and action like 'user.email_change%' order by id`,
  );
  expect(audit).toEqual([
    { action: "user.email_change_requested", from: null, to: null },
    { action: "user.email_changed", from: member.email, to: newEmail },
  ]);
});

test("a taken address gets the same 202 and no link; an expired or replaced link is 404", async () => {
  const tenant = await signedInTenant(h);
  const other = await createUser(h.db, tenant.id);
  const asked = await change(tenant.admin.accessToken, { newEmail: other.email, currentPassword: PASSWORD });
  expect(asked.status).toBe(202);
  expect(await deliverTexts(tenant.admin.email)).toHaveLength(1);
  expect(await deliverTexts(other.email)).toHaveLength(0);

  const newEmail = address();
  expect((await change(tenant.admin.accessToken, { newEmail, currentPassword: PASSWORD })).status).toBe(202);
  const first = tokenOf(linkIn((await deliverTexts(newEmail))[0] ?? ""));
  expect((await change(tenant.admin.accessToken, { newEmail, currentPassword: PASSWORD })).status).toBe(202);
  const second = tokenOf(linkIn((await deliverTexts(newEmail))[0] ?? ""));
  // the newer request spent the older link
  expect((await confirm(first)).status).toBe(404);
  clock.advance(25 * 3_600_000);
  expect((await confirm(second)).status).toBe(404);
  expect(await emailOf(tenant.admin.id)).toMatchObject({ email: tenant.admin.email });
  // the link is stored only as its hash
  const stored = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from single_use_tokens where token_hash = ${second}`,
  );
  expect(stored[0]?.n).toBe(0);
});

test("the address another account took meanwhile is 409 at confirmation; the current one is 400", async () => {
  const tenant = await signedInTenant(h);
  const newEmail = address();
  expect(
    (await change(tenant.owner.accessToken, { newEmail: tenant.owner.email, currentPassword: PASSWORD }))
      .status,
  ).toBe(400);
  expect((await change(tenant.owner.accessToken, { newEmail, currentPassword: PASSWORD })).status).toBe(202);
  const token = tokenOf(linkIn((await deliverTexts(newEmail))[0] ?? ""));
  await createUser(h.db, tenant.id, { email: newEmail });
  expect((await confirm(token)).status).toBe(409);
  expect(await emailOf(tenant.owner.id)).toMatchObject({ email: tenant.owner.email });
});
