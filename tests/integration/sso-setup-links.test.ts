import { beforeAll, beforeEach, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { csrfOf, tenantConsole } from "../helpers/console-tenant.ts";
import { Jar } from "../helpers/cookie-jar.ts";
import {
  json,
  PASSWORD,
  readyPlatformUser,
  type SignedInTenant,
  signedInTenant,
  signIn,
} from "../helpers/identity.ts";

// Issue #34 point 5's last clause: a platform admin hands a tenant's owner a time-limited SSO set-up
// link. It grants nothing by itself: an owner of that tenant signed in to the console lands on the
// tenant's SSO page (after the console sign-in when signed out); anyone else, an expired, revoked or
// unknown token: the same 404. Only the token's hash is stored; it is in no list, log or audit row.

const ORIGIN = "https://ops.plinth.test";
const PUBLIC_BASE = "https://ops.plinth.test";
const clock = new ManualClock(Date.now());
const app = useTestApp({
  clock,
  settings: { ...relaxedLimits, "Server:PublicBaseUrl": PUBLIC_BASE },
  env: { BrowserAuth__AllowedOrigins__0: ORIGIN },
});
const { post, get, signInAs } = tenantConsole(app, ORIGIN);

let staff: { id: string; email: string };
let adminHeaders: Record<string, string>;
beforeAll(async () => {
  staff = await readyPlatformUser(app.db);
});
// a fresh token each test: tests move the clock past an access token's life
beforeEach(async () => {
  adminHeaders = (await signIn(app, staff)).headers;
});

interface CreatedLink {
  id: string;
  url: string;
  expiresAt: string;
}
interface ListedLink {
  id: string;
  createdAt: string;
  createdBy: string | null;
  expiresAt: string;
  openedAt: string | null;
  revokedAt: string | null;
}

const linksPath = (tenantId: string) => `/api/admin/tenants/${tenantId}/sso/setup-links`;
const createLink = (tenantId: string, body?: Record<string, unknown>, headers = adminHeaders) =>
  app.request(linksPath(tenantId), body === undefined ? { method: "POST", headers } : json(body, headers));
async function newLink(tenant: SignedInTenant, body?: Record<string, unknown>): Promise<CreatedLink> {
  const created = await createLink(tenant.id, body);
  expect(created.status).toBe(201);
  return (await created.json()) as CreatedLink;
}
async function listLinks(tenantId: string): Promise<ListedLink[]> {
  const listed = await app.request(linksPath(tenantId), { headers: adminHeaders });
  expect(listed.status).toBe(200);
  return ((await listed.json()) as { items: ListedLink[] }).items;
}
/** The link's console path and query, as the browser opens it. */
const pathOf = (url: string) => {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
};
const tokenOf = (url: string) => new URL(url).searchParams.get("token") ?? "";
const auditOf = (tenantId: string) =>
  execute<{ action: string; actor_id: string | null; target_id: string | null; details: unknown }>(
    app.db,
    sql`select action, actor_id, target_id, details from audit_events
        where tenant_id = ${tenantId} and action like 'sso_setup_link.%' order by id`,
  );

test("an admin makes a link (72 h by default, the token shown once); an owner signed in to the console opens it and lands on the SSO page; openedAt is recorded; the token is in no list, log or audit row", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const link = await newLink(tenant);
  expect(link.url.startsWith(`${PUBLIC_BASE}/console/sso/setup?token=`)).toBe(true);
  const token = tokenOf(link.url);
  expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(new Date(link.expiresAt).getTime()).toBe(clock.now().getTime() + 72 * 3_600_000);
  const [row] = await execute<{ token_hash: string }>(
    app.db,
    sql`select token_hash from sso_setup_links where id = ${link.id}`,
  );
  expect(row?.token_hash).not.toContain(token);
  expect(row?.token_hash).toBe(new Bun.CryptoHasher("sha256").update(token).digest("base64url"));

  const [before] = await listLinks(tenant.id);
  expect(before).toMatchObject({ id: link.id, createdBy: staff.id, openedAt: null, revokedAt: null });

  const { jar } = await signInAs(tenant, tenant.owner.email);
  const opened = await get(jar, pathOf(link.url));
  expect(opened.status).toBe(303);
  expect(opened.headers.get("location")).toBe("/console/sso?setupLink");
  const page = await (await get(jar, "/console/sso?setupLink")).text();
  expect(page).toContain("your platform&#39;s operator sent you here to set up single sign-on");

  const listedText = await (await app.request(linksPath(tenant.id), { headers: adminHeaders })).text();
  expect(listedText).not.toContain(token);
  expect(listedText).not.toContain("tokenHash");
  const [after] = (JSON.parse(listedText) as { items: ListedLink[] }).items;
  expect(after?.openedAt).toBe(clock.now().toISOString());
  // opened again: still works until it expires; openedAt keeps the first opening
  clock.advance(60_000);
  expect((await get(jar, pathOf(link.url))).status).toBe(303);
  expect((await listLinks(tenant.id))[0]?.openedAt).toBe(after?.openedAt ?? "");

  const audit = await auditOf(tenant.id);
  expect(audit.map((a) => a.action)).toEqual([
    "sso_setup_link.created",
    "sso_setup_link.opened",
    "sso_setup_link.opened",
  ]);
  expect(audit[0]).toMatchObject({ actor_id: staff.id, target_id: link.id });
  expect(audit[1]).toMatchObject({ actor_id: tenant.owner.id, details: { first: true } });
  expect(audit[2]).toMatchObject({ details: { first: false } });
  expect(JSON.stringify(audit)).not.toContain(token);
  expect(app.logs.join("\n")).not.toContain(token);
});

test("signed out, the link goes through the console sign-in and back to itself, then to the SSO page", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const link = await newLink(tenant);
  const jar = new Jar();
  const toSignIn = await get(jar, pathOf(link.url));
  expect(toSignIn.status).toBe(303);
  const location = toSignIn.headers.get("location") ?? "";
  expect(location).toBe(`/console/sign-in?next=${encodeURIComponent(pathOf(link.url))}`);
  const form = await (await get(jar, location)).text();
  expect(form).toContain(`name="next" value="${pathOf(link.url)}"`);
  const signedIn = jar.take(
    await post(jar, "/console/sign-in", {
      email: tenant.owner.email,
      password: PASSWORD,
      tenant: tenant.code,
      next: pathOf(link.url),
    }),
  );
  expect(signedIn.status).toBe(303);
  expect(signedIn.headers.get("location")).toBe(pathOf(link.url));
  const landed = await get(jar, pathOf(link.url));
  expect(landed.headers.get("location")).toBe("/console/sso?setupLink");
  expect((await listLinks(tenant.id))[0]?.openedAt).not.toBeNull();
  expect(app.logs.join("\n")).not.toContain(tokenOf(link.url));
});

test("anyone but an owner of that tenant gets the same 404 and opens nothing: its admin, its member, another tenant's owner, platform staff, an unknown token", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const other = await signedInTenant(app, { plan: "enterprise" });
  const link = await newLink(tenant);
  const path = pathOf(link.url);

  const admin = await signInAs(tenant, tenant.admin.email);
  expect((await get(admin.jar, path)).status).toBe(404);
  const member = await signInAs(tenant, tenant.member.email);
  const asMember = await get(member.jar, path);
  expect(asMember.status).toBe(404);
  const otherOwner = await signInAs(other, other.owner.email);
  const asOtherOwner = await get(otherOwner.jar, path);
  expect(asOtherOwner.status).toBe(404);
  const staffJar = new Jar();
  staffJar.take(await post(staffJar, "/console/sign-in", { email: staff.email, password: PASSWORD }));
  expect((await get(staffJar, path)).status).toBe(404);

  const owner = await signInAs(tenant, tenant.owner.email);
  const unknown = await get(
    owner.jar,
    "/console/sso/setup?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
  );
  expect(unknown.status).toBe(404);
  expect((await get(owner.jar, "/console/sso/setup")).status).toBe(404);
  // the same page for each refusal: nothing tells a wrong person from a wrong token
  const mainOf = async (r: Response) =>
    /<main[^>]*>([\s\S]*)<\/main>/.exec(await r.text())?.[1]?.replace(/<code>[^<]*<\/code>/g, "");
  const refusal = await mainOf(unknown);
  expect(refusal).toContain("No such set-up link.");
  expect(await mainOf(asOtherOwner)).toBe(refusal);
  expect(await mainOf(asMember)).toBe(refusal);

  const [listed] = await listLinks(tenant.id);
  expect(listed?.openedAt).toBeNull();
  expect((await auditOf(tenant.id)).map((a) => a.action)).toEqual(["sso_setup_link.created"]);
});

test("an expired link and a revoked one are 404; revoking twice, or through another tenant, is 404", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const other = await signedInTenant(app, { plan: "enterprise" });
  const { jar } = await signInAs(tenant, tenant.owner.email);

  const short = await newLink(tenant, { expiresInHours: 1 });
  expect(new Date(short.expiresAt).getTime()).toBe(clock.now().getTime() + 3_600_000);
  // a second later: the list's order (newest first) does not hang on two equal creation times
  clock.advance(1_000);
  const revoked = await newLink(tenant);
  clock.advance(3_600_000);
  expect((await get(jar, pathOf(short.url))).status).toBe(404);
  adminHeaders = (await signIn(app, staff)).headers;

  // another tenant's admin path does not reach the link
  const across = await app.request(`${linksPath(other.id)}/${revoked.id}`, {
    method: "DELETE",
    headers: adminHeaders,
  });
  expect(across.status).toBe(404);
  expect((await listLinks(other.id)).length).toBe(0);
  expect((await get(jar, pathOf(revoked.url))).status).toBe(303);

  const gone = await app.request(`${linksPath(tenant.id)}/${revoked.id}`, {
    method: "DELETE",
    headers: adminHeaders,
  });
  expect(gone.status).toBe(204);
  expect((await get(jar, pathOf(revoked.url))).status).toBe(404);
  const again = await app.request(`${linksPath(tenant.id)}/${revoked.id}`, {
    method: "DELETE",
    headers: adminHeaders,
  });
  expect(again.status).toBe(404);
  const notAnId = await app.request(`${linksPath(tenant.id)}/not-an-id`, {
    method: "DELETE",
    headers: adminHeaders,
  });
  expect(notAnId.status).toBe(404);

  const listed = await listLinks(tenant.id);
  expect(listed.map((l) => l.id)).toEqual([revoked.id, short.id]);
  expect(listed[0]?.revokedAt).toBe(clock.now().toISOString());
  expect(listed[1]?.openedAt).toBeNull();
  expect((await auditOf(tenant.id)).map((a) => a.action)).toEqual([
    "sso_setup_link.created",
    "sso_setup_link.created",
    "sso_setup_link.opened",
    "sso_setup_link.revoked",
  ]);
});

test("only platform admins make links; the cap is enforced (400); a plan without sso is 402; an unknown tenant 404", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  for (const user of [tenant.owner, tenant.admin, tenant.member])
    expect((await createLink(tenant.id, {}, user.headers)).status).toBe(403);
  expect((await app.request(linksPath(tenant.id), { headers: tenant.owner.headers })).status).toBe(403);
  expect((await app.request(linksPath(tenant.id), { method: "POST" })).status).toBe(401);

  for (const expiresInHours of [0, 169, 1.5, -1]) {
    const refused = await createLink(tenant.id, { expiresInHours });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { errors?: { path: string }[] }).errors?.[0]?.path).toContain(
      "expiresInHours",
    );
  }
  const longest = await newLink(tenant, { expiresInHours: 168 });
  expect(new Date(longest.expiresAt).getTime()).toBe(clock.now().getTime() + 168 * 3_600_000);

  const free = await signedInTenant(app);
  const unpaid = await createLink(free.id, {});
  expect(unpaid.status).toBe(402);
  expect((await listLinks(free.id)).length).toBe(0);
  const unknown = crypto.randomUUID();
  expect((await createLink(unknown, {})).status).toBe(404);
  expect((await app.request(linksPath(unknown), { headers: adminHeaders })).status).toBe(404);
  expect((await createLink("not-a-tenant", {})).status).toBe(404);
});

test("the console's tenant page: an admin creates a link (shown once, with its expiry), sees it listed and revokes it", async () => {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const jar = new Jar();
  jar.take(await post(jar, "/console/sign-in", { email: staff.email, password: PASSWORD }));
  const page = await (await get(jar, `/console/tenants/${tenant.id}`)).text();
  expect(page).toContain("Create SSO set-up link");
  expect(page).toContain("No set-up links.");
  const csrf = csrfOf(page);

  const created = await post(jar, `/console/tenants/${tenant.id}/sso-setup-links`, {
    csrf,
    expiresInHours: "24",
  });
  expect(created.status).toBe(200);
  const shown = await created.text();
  const url = /<code class="secret">([^<]+)<\/code>/.exec(shown)?.[1] ?? "";
  expect(url.startsWith(`${PUBLIC_BASE}/console/sso/setup?token=`)).toBe(true);
  const expiresAt = new Date(clock.now().getTime() + 24 * 3_600_000).toISOString();
  expect(shown).toContain(`datetime="${expiresAt}"`);

  const listedPage = await (await get(jar, `/console/tenants/${tenant.id}`)).text();
  expect(listedPage).not.toContain(tokenOf(url));
  expect(listedPage).toContain("not opened yet");
  const [link] = await listLinks(tenant.id);
  expect(link?.expiresAt).toBe(expiresAt);
  const revokeAction = `/console/tenants/${tenant.id}/sso-setup-links/${link?.id}/revoke`;
  expect(listedPage).toContain(revokeAction);

  const owner = await signInAs(tenant, tenant.owner.email);
  expect((await get(owner.jar, pathOf(url))).status).toBe(303);
  expect(await (await get(jar, `/console/tenants/${tenant.id}`)).text()).toContain("opened");

  const revoked = await post(jar, revokeAction, { csrf });
  expect(revoked.status).toBe(303);
  expect(revoked.headers.get("location")).toBe(`/console/tenants/${tenant.id}?done=linkRevoked`);
  const after = await (await get(jar, `/console/tenants/${tenant.id}?done=linkRevoked`)).text();
  expect(after).toContain("The SSO set-up link is revoked");
  expect(after).not.toContain(revokeAction);
  expect((await get(owner.jar, pathOf(url))).status).toBe(404);

  // a free tenant: the console says so in words (402)
  const free = await signedInTenant(app);
  const refused = await post(jar, `/console/tenants/${free.id}/sso-setup-links`, {
    csrf,
    expiresInHours: "24",
  });
  expect(refused.status).toBe(402);
  expect(await refused.text()).toContain("Not in your plan");
});
