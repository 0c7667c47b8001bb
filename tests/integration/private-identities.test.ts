import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { tenantMemberships, users } from "../../src/db/schema/index.ts";
import { hashPassword } from "../../src/security/passwords.ts";
import { activeDomain, bearer, json, loginTokens, PASSWORD, signedInTenant } from "../helpers/identity.ts";
import { useMailTestApp } from "../helpers/mailed-links.ts";

/**
 * Issue #32: a white-label tenant keeps its users' identities to itself (`privateIdentities`, set
 * through the API by its owner). On its host an address with an account in another tenant gets no
 * answer different from an address with no account anywhere: sign-in, reset, e-mail code,
 * invitation, switching.
 */
const clock = new ManualClock(new Date());
const { h } = useMailTestApp({ clock });

const patch = (headers: Record<string, string>, body: unknown) =>
  h.request("/api/tenant/settings", {
    method: "PATCH",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

test("on a private tenant's host, an address known elsewhere answers as an unknown one", async () => {
  const a = await signedInTenant(h);
  const p = await signedInTenant(h);
  const changed = await patch(p.owner.headers, { privateIdentities: true, emailSignIn: true });
  expect(changed.status).toBe(200);
  expect(await changed.json()).toEqual({ privateIdentities: true, emailSignIn: true });
  const host = await activeDomain(h.db, p.id, `login.${p.code}.test`);
  const on = (path: string) => `http://${host}${path}`;

  // a person with a shared sign-in in tenant A only, and an address with no account at all
  const known = `k${crypto.randomUUID().slice(0, 8)}@example.com`;
  const [person] = await h.db
    .insert(users)
    .values({ pool: "shared", email: known, name: "Kim", passwordHash: await hashPassword(PASSWORD) })
    .returning({ id: users.id });
  if (!person) throw new Error("no user");
  await h.db.insert(tenantMemberships).values({ tenantId: a.id, userId: person.id, role: "member" });
  const unknown = `u${crypto.randomUUID().slice(0, 8)}@example.com`;

  const answer = async (response: Response) => {
    const text = await response.text();
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : null;
    return [
      response.status,
      body && { code: body.code, detail: body.detail, keys: Object.keys(body).sort() },
    ];
  };
  const both = async (make: (email: string) => Promise<Response>) => {
    const [forKnown, forUnknown] = [await answer(await make(known)), await answer(await make(unknown))];
    expect(forKnown).toEqual(forUnknown);
    return forKnown;
  };

  // sign-in with the right password of the other tenant's account: the same 401
  expect(
    await both((email) => h.request(on("/api/auth/login"), json({ email, password: PASSWORD }))),
  ).toEqual([401, expect.anything()]);
  // password reset and e-mail code: the same 202, and no message at all
  expect(await both((email) => h.request(on("/api/auth/password/forgot"), json({ email })))).toEqual([
    202,
    null,
  ]);
  expect(await both((email) => h.request(on("/api/auth/email/code"), json({ email })))).toEqual([202, null]);
  await h.deps.pending.settled(5_000);
  const mailed = await execute<{ n: number }>(
    h.db,
    sql`select count(*)::int as n from email_messages where recipient in (${known}, ${unknown})`,
  );
  expect(mailed[0]?.n).toBe(0);
  // an e-mail code guessed for either: the same 401
  expect(
    await both((email) => h.request(on("/api/auth/email/code/verify"), json({ email, code: "123456" }))),
  ).toEqual([401, expect.anything()]);
  // inviting either into the private tenant: the same 201 shape
  const invite = async (email: string) => {
    const response = await h.request(
      on("/api/tenant/invitations"),
      json({ email, role: "member" }, p.owner.headers),
    );
    const body = (await response.json()) as Record<string, unknown>;
    return new Response(JSON.stringify({ role: body.role, keys: Object.keys(body).sort() }), {
      status: response.status,
    });
  };
  expect((await both(invite))[0]).toBe(201);

  // the person, signed in to A, cannot switch to P: the same 404 as a tenant that does not exist
  const inA = await loginTokens(h, { email: known, tenant: a.code });
  const toP = await h.request(
    "/api/auth/switch",
    json({ tenant: p.code }, bearer(inA.accessToken).headers as Record<string, string>),
  );
  const toNowhere = await h.request(
    "/api/auth/switch",
    json(
      { tenant: `zz${crypto.randomUUID().slice(0, 8)}` },
      bearer(inA.accessToken).headers as Record<string, string>,
    ),
  );
  expect(await answer(toP)).toEqual(await answer(toNowhere));
  expect(toP.status).toBe(404);
});

test("only the owner (or a platform admin) turns privateIdentities on; admins read it", async () => {
  const p = await signedInTenant(h);
  expect((await patch(p.admin.headers, { privateIdentities: true })).status).toBe(403);
  expect((await patch(p.member.headers, { privateIdentities: true })).status).toBe(403);
  const read = await h.request("/api/tenant/settings", bearer(p.admin.accessToken));
  expect(await read.json()).toEqual({ privateIdentities: false, emailSignIn: false });
  expect((await h.request("/api/tenant/settings", bearer(p.member.accessToken))).status).toBe(403);
});
