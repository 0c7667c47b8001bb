import { expect, test } from "bun:test";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { Jar } from "../helpers/cookie-jar.ts";
import { PASSWORD, readyPlatformUser, signedInTenant, signIn } from "../helpers/identity.ts";

// Issue #32: the console's own sessions page (list, end one, end every other) and the tenant page's
// member sessions, under the console's CSP (no inline script); every end is refused at once.

const ORIGIN = "https://ops.plinth.test";
const app = useTestApp({ settings: relaxedLimits, env: { BrowserAuth__AllowedOrigins__0: ORIGIN } });

const form = (jar: Jar, body: Record<string, string>): RequestInit => ({
  method: "POST",
  headers: { cookie: jar.header(), origin: ORIGIN, "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams(body).toString(),
});

async function consoleSignIn(email: string): Promise<Jar> {
  const jar = new Jar();
  const signedIn = jar.take(await app.request("/console/sign-in", form(jar, { email, password: PASSWORD })));
  expect(signedIn.status).toBe(303);
  return jar;
}

const get = (jar: Jar, path: string) => app.request(path, { headers: { cookie: jar.header() } });
const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
const me = (accessToken: string) =>
  app.request("/api/auth/me", { headers: { authorization: `Bearer ${accessToken}` } });

test("a staff member lists their sessions, ends one and then every other; the console's stays", async () => {
  const staff = await readyPlatformUser(app.db);
  const jar = await consoleSignIn(staff.email);
  const first = await signIn(app, staff);
  const second = await signIn(app, staff);

  const response = await get(jar, "/console/sessions");
  expect(response.status).toBe(200);
  expect(response.headers.get("content-security-policy")).toContain("script-src 'self'");
  const page = await response.text();
  // no inline script: every script (none here) comes from the console's own files
  expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  expect(page).not.toMatch(/\son[a-z]+="/);
  expect(page).toContain("this session");
  const ends = [...page.matchAll(/action="(\/console\/sessions\/[0-9a-f-]{36}\/end)"/g)].map(
    (m) => m[1] ?? "",
  );
  expect(ends).toHaveLength(2);

  const [one] = ends;
  const ended = await app.request(one ?? "", form(jar, { csrf: csrfOf(page) }));
  expect(ended.status).toBe(303);
  expect(ended.headers.get("location")).toBe("/console/sessions?ended");
  const left = [(await me(first.accessToken)).status, (await me(second.accessToken)).status].sort();
  expect(left).toEqual([200, 401]);

  const others = await app.request("/console/sessions/end-others", form(jar, { csrf: csrfOf(page) }));
  expect(others.status).toBe(303);
  expect((await me(first.accessToken)).status).toBe(401);
  expect((await me(second.accessToken)).status).toBe(401);
  const after = await (await get(jar, "/console/sessions?others")).text();
  expect(after).toContain("Every other session ended.");
  expect([...after.matchAll(/\/console\/sessions\/[0-9a-f-]{36}\/end/g)]).toHaveLength(0);
  // another staff member's session is not theirs to end: 404
  const stranger = await readyPlatformUser(app.db);
  const theirs = await consoleSignIn(stranger.email);
  const theirPage = await (await get(theirs, "/console/sessions")).text();
  expect((await app.request(one ?? "", form(theirs, { csrf: csrfOf(theirPage) }))).status).toBe(404);
});

test("the tenant page lists member sessions; an administrator ends a member's, a viewer cannot", async () => {
  const tenant = await signedInTenant(app);
  const admin = await consoleSignIn((await readyPlatformUser(app.db)).email);
  const viewer = await consoleSignIn((await readyPlatformUser(app.db, { role: "platform_viewer" })).email);
  const path = `/console/tenants/${tenant.id}`;
  const page = await (await get(admin, path)).text();
  expect(page).toContain("Member sessions");
  expect(page).toContain(tenant.member.email);
  const action = `/console/tenants/${tenant.id}/users/${tenant.member.id}/end-sessions`;
  expect(page).toContain(`action="${action}"`);

  // a viewer sees the sessions but no button, and the post is refused
  const viewerPage = await (await get(viewer, path)).text();
  expect(viewerPage).toContain(tenant.member.email);
  expect(viewerPage).not.toContain(`action="${action}"`);
  expect((await app.request(action, form(viewer, { csrf: csrfOf(viewerPage) }))).status).toBe(403);
  // and a viewer ends their own sessions (their own account)
  const own = await (await get(viewer, "/console/sessions")).text();
  expect(
    (await app.request("/console/sessions/end-others", form(viewer, { csrf: csrfOf(own) }))).status,
  ).toBe(303);

  const ended = await app.request(action, form(admin, { csrf: csrfOf(page) }));
  expect(ended.status).toBe(303);
  expect((await me(tenant.member.accessToken)).status).toBe(401);
  expect((await me(tenant.admin.accessToken)).status).toBe(200);
  const after = await (await get(admin, `${path}?done=sessions`)).text();
  expect(after).toContain("sessions in this tenant ended.");
  expect(after).not.toContain(`action="${action}"`);
});
