import { expect, test } from "bun:test";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { Jar } from "../helpers/cookie-jar.ts";
import { json, PASSWORD, readyPlatformUser, signedInTenant, signIn } from "../helpers/identity.ts";

// The console's impersonation banner: while an administrator has an impersonation open, every
// console page says so and offers to end it; ending it ends the session on every API process.

const ORIGIN = "https://ops.plinth.test";
const app = useTestApp({ settings: relaxedLimits, env: { BrowserAuth__AllowedOrigins__0: ORIGIN } });

const form = (jar: Jar, body: Record<string, string>): RequestInit => ({
  method: "POST",
  headers: {
    cookie: jar.header(),
    origin: ORIGIN,
    "content-type": "application/x-www-form-urlencoded",
  },
  body: new URLSearchParams(body).toString(),
});

test("an open impersonation is a banner on every console page until its End button ends the session", async () => {
  const staff = await readyPlatformUser(app.db);
  const admin = await signIn(app, staff);
  const tenant = await signedInTenant(app);
  const started = await app.request(
    "/api/admin/impersonations",
    json(
      { userId: tenant.member.id, tenant: tenant.code, reason: "console banner", minutes: 15 },
      { authorization: `Bearer ${admin.accessToken}` },
    ),
  );
  expect(started.status).toBe(200);
  const pair = (await started.json()) as { accessToken: string };

  const jar = new Jar();
  const signedIn = jar.take(
    await app.request("/console/sign-in", form(jar, { email: staff.email, password: PASSWORD })),
  );
  expect(signedIn.status).toBe(303);
  const page = await (await app.request("/console/jobs", { headers: { cookie: jar.header() } })).text();
  expect(page).toContain("You are impersonating");
  expect(page).toContain(tenant.member.email);
  const action = /action="(\/console\/impersonations\/[0-9a-f-]+\/end)"/.exec(page)?.[1] ?? "";
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
  expect(action).not.toBe("");

  // another administrator sees no banner and cannot end it
  const other = new Jar();
  const otherStaff = await readyPlatformUser(app.db);
  other.take(
    await app.request("/console/sign-in", form(other, { email: otherStaff.email, password: PASSWORD })),
  );
  const otherPage = await (
    await app.request("/console/jobs", { headers: { cookie: other.header() } })
  ).text();
  expect(otherPage).not.toContain("You are impersonating");
  const otherCsrf = /name="csrf" value="([^"]+)"/.exec(otherPage)?.[1] ?? "";
  expect((await app.request(action, form(other, { csrf: otherCsrf }))).status).toBe(404);
  expect(
    (await app.request("/api/auth/me", { headers: { authorization: `Bearer ${pair.accessToken}` } })).status,
  ).toBe(200);

  const ended = await app.request(action, form(jar, { csrf }));
  expect(ended.status).toBe(303);
  expect(
    (await app.request("/api/auth/me", { headers: { authorization: `Bearer ${pair.accessToken}` } })).status,
  ).toBe(401);
  const after = await (await app.request("/console/jobs", { headers: { cookie: jar.header() } })).text();
  expect(after).not.toContain("You are impersonating");
});
