import { describe, expect, test } from "bun:test";
import { and, eq, sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { tenantFeatureOverrides, tenantMemberships, tenants, users } from "../../src/db/schema/index.ts";
import {
  bearer,
  json,
  type SignedInTenant,
  signedInPlatformAdmin,
  signedInTenant,
} from "../helpers/identity.ts";
import { tokenOf, useMailTestApp } from "../helpers/mailed-links.ts";

// Issue #32 point 4: invitations, read back from a real SMTP server and followed.

const clock = new ManualClock(new Date());
const { h, smtp, deliverLinks } = useMailTestApp({ clock });

const PASSWORD = "juniper-lantern-orbit-77";

const address = () => `inv${crypto.randomUUID().slice(0, 8)}@example.com`;

async function invite(tenant: SignedInTenant, email: string, role = "member", by = tenant.owner) {
  return h.request("/api/tenant/invitations", json({ email, role }, by.headers));
}
async function inviteLink(tenant: SignedInTenant, email: string, role = "member"): Promise<string> {
  const response = await invite(tenant, email, role);
  expect(response.status).toBe(201);
  const [link] = await deliverLinks(email);
  expect(link).toStartWith("https://app.plinth.test/auth/accept-invitation?token=");
  return tokenOf(link ?? "");
}
const accept = (body: { token: string; name?: string; password?: string }) =>
  h.request("/api/auth/invitations/accept", json(body));
const tidOf = (token: string) => (decodeJwt(token) as { tid: string }).tid;

describe("invitations", () => {
  test("/me lists a known user's tenants from the session cache: a tenant joined or left shows at once", async () => {
    const [a, b, c] = [await signedInTenant(h), await signedInTenant(h), await signedInTenant(h)];
    const email = address();
    const joinedA = await accept({ token: await inviteLink(a, email), name: "Rae", password: PASSWORD });
    const inA = (await joinedA.json()) as { accessToken: string };
    const userId = (decodeJwt(inA.accessToken) as { sub: string }).sub;
    const listed = async () => {
      const me = (await (await h.request("/api/auth/me", bearer(inA.accessToken))).json()) as {
        memberships: { tenant: { id: string } }[];
      };
      return me.memberships.map((m) => m.tenant.id).sort();
    };
    expect(await listed()).toEqual([a.id]);
    // written behind the API's back (no notice): seen once Authentication:SessionCacheSeconds (5) pass
    await h.db.insert(tenantMemberships).values({ tenantId: c.id, userId, role: "member" });
    expect(await listed()).toEqual([a.id]);
    clock.advance(5_001);
    expect(await listed()).toEqual([a.id, c.id].sort());
    // through the API: at once
    expect((await accept({ token: await inviteLink(b, email) })).status).toBe(200);
    expect(await listed()).toEqual([a.id, b.id, c.id].sort());
    const removed = await h.request(`/api/tenant/users/${userId}`, {
      method: "DELETE",
      headers: b.owner.headers,
    });
    expect(removed.status).toBe(204);
    expect(await listed()).toEqual([a.id, c.id].sort());
  });

  test("a new address gets an account; invited by a second tenant it joins it, /me lists both, switch changes the tenant", async () => {
    const a = await signedInTenant(h);
    const b = await signedInTenant(h);
    const email = address();
    const created = await invite(a, email, "admin");
    expect(created.status).toBe(201);
    const body = (await created.json()) as { id: string; email: string; role: string; expiresAt: string };
    expect(body).toMatchObject({ email, role: "admin" });
    expect(created.headers.get("location")).toBe(`/api/tenant/invitations/${body.id}`);
    const [link] = await deliverLinks(email);
    const message = smtp().received.at(-1);
    expect(message?.mail.subject).toContain(a.name);

    // a new account needs a name and a password
    const bare = await accept({ token: tokenOf(link ?? "") });
    expect(bare.status).toBe(400);
    const joinedA = await accept({ token: tokenOf(link ?? ""), name: "Quinn", password: PASSWORD });
    expect(joinedA.status).toBe(200);
    const inA = (await joinedA.json()) as { accessToken: string };
    expect(tidOf(inA.accessToken)).toBe(a.id);

    // B invites the same address: the link joins the existing sign-in, no password asked
    const tokenB = await inviteLink(b, email);
    const joinedB = await accept({ token: tokenB });
    expect(joinedB.status).toBe(200);
    const inB = (await joinedB.json()) as { accessToken: string };
    expect(tidOf(inB.accessToken)).toBe(b.id);
    expect((decodeJwt(inB.accessToken) as { sub: string }).sub).toBe(
      (decodeJwt(inA.accessToken) as { sub: string }).sub,
    );

    const me = (await (await h.request("/api/auth/me", bearer(inA.accessToken))).json()) as {
      memberships: { tenant: { id: string }; role: string }[];
    };
    expect(me.memberships.map((m) => [m.tenant.id, m.role]).sort()).toEqual(
      [
        [a.id, "admin"],
        [b.id, "member"],
      ].sort(),
    );
    const switched = await h.request(
      "/api/auth/switch",
      json({ tenant: b.code }, { authorization: `Bearer ${inA.accessToken}` }),
    );
    expect(switched.status).toBe(200);
    expect(tidOf(((await switched.json()) as { accessToken: string }).accessToken)).toBe(b.id);

    // listed in both tenants' users and invitations
    for (const tenant of [a, b]) {
      const listed = (await (
        await h.request("/api/tenant/invitations", bearer(tenant.owner.accessToken))
      ).json()) as {
        items: { email: string; status: string }[];
      };
      expect(listed.items.find((i) => i.email === email)?.status).toBe("accepted");
    }
    // audited and emitted in each tenant
    const audit = await execute<{ action: string; tenant_id: string }>(
      h.db,
      sql`select action, tenant_id::text from audit_events where action like 'invitation.%' and tenant_id in (${a.id}, ${b.id}) order by id`,
    );
    expect(audit.map((r) => r.action)).toEqual([
      "invitation.created",
      "invitation.accepted",
      "invitation.created",
      "invitation.accepted",
    ]);
    const events = await execute<{ type: string }>(
      h.db,
      sql`select type from webhook_events where tenant_id = ${b.id} and type like 'invitation.%' order by occurred_at, type`,
    );
    expect(events.map((e) => e.type).sort()).toEqual(["invitation.accepted", "invitation.created"]);
  });

  test("a used, expired, revoked or replaced link is 404, each alike", async () => {
    const a = await signedInTenant(h);
    const used = await inviteLink(a, address());
    expect((await accept({ token: used, name: "U", password: PASSWORD })).status).toBe(200);

    const revokedEmail = address();
    const revokedToken = await inviteLink(a, revokedEmail);
    const listed = (await (
      await h.request("/api/tenant/invitations", bearer(a.owner.accessToken))
    ).json()) as {
      items: { id: string; email: string }[];
    };
    const revokedId = listed.items.find((i) => i.email === revokedEmail)?.id ?? "";
    const revoked = await h.request(`/api/tenant/invitations/${revokedId}`, {
      method: "DELETE",
      headers: a.owner.headers,
    });
    expect(revoked.status).toBe(204);

    const resentEmail = address();
    const oldToken = await inviteLink(a, resentEmail);
    const again = (await (
      await h.request("/api/tenant/invitations", bearer(a.owner.accessToken))
    ).json()) as {
      items: { id: string; email: string }[];
    };
    const resentId = again.items.find((i) => i.email === resentEmail)?.id ?? "";
    const resent = await h.request(`/api/tenant/invitations/${resentId}/resend`, {
      method: "POST",
      headers: a.owner.headers,
    });
    expect(resent.status).toBe(200);
    const [newLink] = await deliverLinks(resentEmail);
    const expiredToken = await inviteLink(a, address());

    const dead = async (token: string) => {
      const response = await accept({ token, name: "X", password: PASSWORD });
      const { instance: _i, requestId: _r, ...problem } = (await response.json()) as Record<string, unknown>;
      return [response.status, JSON.stringify(problem)];
    };
    const answers = [
      await dead(used),
      await dead(revokedToken),
      await dead(oldToken),
      await dead("no-such-token"),
    ];
    // the resent link works (once)
    expect((await accept({ token: tokenOf(newLink ?? ""), name: "R", password: PASSWORD })).status).toBe(200);
    answers.push(await dead(tokenOf(newLink ?? "")));
    // expired: a week has passed (set on the row, as the clock of the rate limits is shared)
    await execute(
      h.db,
      sql`update tenant_invitations set expires_at = ${new Date(clock.now().getTime() - 1000).toISOString()}::timestamptz where tenant_id = ${a.id} and status = 'Pending'`,
    );
    answers.push(await dead(expiredToken));
    expect(answers.map(([status]) => status)).toEqual([404, 404, 404, 404, 404, 404]);
    expect(new Set(answers.map(([, problem]) => problem)).size).toBe(1);
  });

  test("seats: members plus pending invitations are held to the plan (403), a plan without seats is 402", async () => {
    const a = await signedInTenant(h);
    await h.db
      .insert(tenantFeatureOverrides)
      .values({ tenantId: a.id, featureKey: "seats", enabled: true, limit: 4 });
    // three members: one seat left
    expect((await invite(a, address())).status).toBe(201);
    const full = await invite(a, address());
    expect(full.status).toBe(403);
    expect(((await full.json()) as { code: string }).code).toBe("usage_limit_reached");
    await h.db
      .update(tenantFeatureOverrides)
      .set({ enabled: false })
      .where(and(eq(tenantFeatureOverrides.tenantId, a.id), eq(tenantFeatureOverrides.featureKey, "seats")));
    const none = await invite(a, address());
    expect(none.status).toBe(402);
  });

  test("adding a user with a password takes a seat as an invitation does; platform admins are not held", async () => {
    const a = await signedInTenant(h);
    await h.db
      .insert(tenantFeatureOverrides)
      .values({ tenantId: a.id, featureKey: "seats", enabled: true, limit: 5 });
    const addUser = (headers: Record<string, string>, path = "/api/tenant/users") =>
      h.request(path, json({ email: address(), name: "Added", password: PASSWORD, role: "member" }, headers));
    // three members and one pending invitation: one seat left, which the added user takes
    expect((await invite(a, address())).status).toBe(201);
    expect((await addUser(a.owner.headers)).status).toBe(201);
    const full = await addUser(a.admin.headers);
    expect(full.status).toBe(403);
    expect(((await full.json()) as { code: string }).code).toBe("usage_limit_reached");
    expect((await invite(a, address())).status).toBe(403);
    const admin = await signedInPlatformAdmin(h);
    expect(
      (
        await addUser(
          bearer(admin.accessToken).headers as Record<string, string>,
          `/api/admin/tenants/${a.id}/users`,
        )
      ).status,
    ).toBe(201);
    await h.db
      .update(tenantFeatureOverrides)
      .set({ enabled: false })
      .where(and(eq(tenantFeatureOverrides.tenantId, a.id), eq(tenantFeatureOverrides.featureKey, "seats")));
    const none = await addUser(a.owner.headers);
    expect(none.status).toBe(402);
  });

  test("an admin invites members and admins, never an owner; a member, nobody", async () => {
    const a = await signedInTenant(h);
    expect((await invite(a, address(), "owner", a.admin)).status).toBe(403);
    expect((await invite(a, address(), "admin", a.admin)).status).toBe(201);
    expect((await invite(a, address(), "member", a.member)).status).toBe(403);
    // twice the same address: 409; a member's address: 409
    const email = address();
    expect((await invite(a, email)).status).toBe(201);
    expect((await invite(a, email)).status).toBe(409);
    expect((await invite(a, a.member.email)).status).toBe(409);
  });

  test("inviting answers alike whether or not the address has an account elsewhere", async () => {
    const a = await signedInTenant(h);
    const b = await signedInTenant(h);
    const known = address();
    expect((await accept({ token: await inviteLink(a, known), name: "K", password: PASSWORD })).status).toBe(
      200,
    );
    const shape = async (response: Response) => {
      const body = (await response.json()) as Record<string, unknown>;
      return [response.status, Object.keys(body).sort(), body.role];
    };
    expect(await shape(await invite(b, known))).toEqual(await shape(await invite(b, address())));
  });

  test("a tenant that keeps identities private gives its invitee an account of its own", async () => {
    const a = await signedInTenant(h);
    const p = await signedInTenant(h);
    await h.db.update(tenants).set({ privateIdentities: true }).where(eq(tenants.id, p.id));
    const email = address();
    expect((await accept({ token: await inviteLink(a, email), name: "S", password: PASSWORD })).status).toBe(
      200,
    );
    const token = await inviteLink(p, email);
    // the shared sign-in is not joined: a new account, with its own password
    expect((await accept({ token })).status).toBe(400);
    const joined = await accept({ token, name: "S", password: `${PASSWORD}-p` });
    expect(joined.status).toBe(200);
    const rows = await h.db
      .select({ id: users.id, pool: users.pool })
      .from(users)
      .where(eq(users.email, email));
    expect(rows.map((r) => r.pool).sort()).toEqual(["shared", "tenant"]);
    const inP = (await joined.json()) as { accessToken: string };
    const me = (await (await h.request("/api/auth/me", bearer(inP.accessToken))).json()) as {
      memberships: { tenant: { id: string } }[];
    };
    expect(me.memberships.map((m) => m.tenant.id)).toEqual([p.id]);
  });
});
