import { expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import {
  auditEvents,
  backgroundJobs,
  jobDependencies,
  jobSchedules,
  users,
} from "../../src/db/schema/index.ts";
import { startIntervalLoop } from "../../src/loops/interval-loop.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { Jar } from "../helpers/cookie-jar.ts";
import { activeDomain, createTenant, createUser, PASSWORD, readyPlatformUser } from "../helpers/identity.ts";

// The console over HTTP, without a browser: its door (session cookie, origin, CSRF token, forced
// password change, platform staff only, viewers read only), its policy headers and its assets.
// tests/e2e/console.test.ts drives the same pages in Chromium.

const ORIGIN = "https://ops.plinth.test";
const app = useTestApp({ settings: relaxedLimits, env: { BrowserAuth__AllowedOrigins__0: ORIGIN } });

async function get(jar: Jar, path: string, headers: Record<string, string> = {}) {
  return jar.take(await app.request(path, { headers: { cookie: jar.header(), ...headers } }));
}

async function post(
  jar: Jar,
  path: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
) {
  return jar.take(
    await app.request(path, {
      method: "POST",
      headers: {
        cookie: jar.header(),
        origin: ORIGIN,
        "content-type": "application/x-www-form-urlencoded",
        ...headers,
      },
      body: new URLSearchParams(form).toString(),
    }),
  );
}

/** The CSRF token a console page carries in its forms. */
async function csrfOf(jar: Jar): Promise<string> {
  const page = await (await get(jar, "/console/schedules")).text();
  const token = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  if (!token) throw new Error(`no CSRF token in the page: ${page.slice(0, 300)}`);
  return token;
}

async function signedIn(email: string): Promise<Jar> {
  const jar = new Jar();
  const response = await post(jar, "/console/sign-in", { email, password: PASSWORD });
  expect(response.status).toBe(303);
  return jar;
}

async function seedSchedule(name: string) {
  await app.db
    .insert(jobSchedules)
    .values({ name, cron: "0 * * * *", kind: "console.test", enabled: true })
    .onConflictDoNothing();
}

test("without a session every console page sends the browser to the sign-in page, which names where it came from", async () => {
  const jar = new Jar();
  const response = await get(jar, "/console/jobs");
  expect(response.status).toBe(303);
  expect(response.headers.get("location")).toBe("/console/sign-in?next=%2Fconsole%2Fjobs");
  const page = await get(jar, "/console/sign-in");
  expect(page.status).toBe(200);
  expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
  expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  const html = await page.text();
  expect(html).not.toContain("<script>");
  expect(html).not.toMatch(/\sstyle="/);
});

test("sign-in needs an allowed origin; a wrong password is a 401 page; a right one sets HttpOnly __Host- cookies", async () => {
  const admin = await readyPlatformUser(app.db);
  const jar = new Jar();
  const foreign = await post(
    jar,
    "/console/sign-in",
    { email: admin.email, password: PASSWORD },
    { origin: "https://evil.test" },
  );
  expect(foreign.status).toBe(403);
  expect(jar.cookies.size).toBe(0);
  const wrong = await post(jar, "/console/sign-in", {
    email: admin.email,
    password: "not the password at all",
  });
  expect(wrong.status).toBe(401);
  expect(await wrong.text()).toContain("The e-mail or password is wrong.");
  const right = await post(jar, "/console/sign-in", {
    email: admin.email,
    password: PASSWORD,
    next: "/console/domains",
  });
  expect(right.status).toBe(303);
  expect(right.headers.get("location")).toBe("/console/domains");
  const cookies = right.headers.getSetCookie();
  expect(cookies.length).toBe(2);
  for (const cookie of cookies) {
    expect(cookie).toMatch(/^__Host-/);
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("Secure");
    expect(cookie).toContain("Path=/");
  }
  // an open redirect is not possible through next=
  const elsewhere = await post(new Jar(), "/console/sign-in", {
    email: admin.email,
    password: PASSWORD,
    next: "https://evil.test/",
  });
  expect(elsewhere.headers.get("location")).toBe("/console");
  const overview = await get(jar, "/console");
  expect(overview.status).toBe(200);
  expect(overview.headers.get("cache-control")).toBe("no-store");
  expect(await overview.text()).toContain("Open jobs");
});

test("a change needs the CSRF token (form field or X-CSRF-Token) and an allowed Origin", async () => {
  const admin = await readyPlatformUser(app.db);
  await seedSchedule("console-csrf");
  const jar = await signedIn(admin.email);
  const token = await csrfOf(jar);
  const enabled = async () =>
    (
      await app.db
        .select({ enabled: jobSchedules.enabled })
        .from(jobSchedules)
        .where(eq(jobSchedules.name, "console-csrf"))
    )[0]?.enabled;
  expect((await post(jar, "/console/schedules/console-csrf/disable", {})).status).toBe(403);
  expect((await post(jar, "/console/schedules/console-csrf/disable", { csrf: "x".repeat(43) })).status).toBe(
    403,
  );
  expect(
    (
      await post(
        jar,
        "/console/schedules/console-csrf/disable",
        { csrf: token },
        { origin: "https://evil.test" },
      )
    ).status,
  ).toBe(403);
  const noOrigin = await app.request("/console/schedules/console-csrf/disable", {
    method: "POST",
    headers: { cookie: jar.header(), "content-type": "application/x-www-form-urlencoded" },
    body: `csrf=${token}`,
  });
  expect(noOrigin.status).toBe(403);
  expect(await enabled()).toBe(true);
  const done = await post(jar, "/console/schedules/console-csrf/disable", { csrf: token });
  expect(done.status).toBe(303);
  expect(await enabled()).toBe(false);
  const byHeader = await post(jar, "/console/schedules/console-csrf/enable", {}, { "x-csrf-token": token });
  expect(byHeader.status).toBe(303);
  expect(await enabled()).toBe(true);
  // the change is logged as an admin action naming the actor
  const line = app.logs.find((l) => l.includes('"schedule.enabled"') && l.includes("console-csrf"));
  expect(line).toBeDefined();
  expect(JSON.parse(line ?? "{}")).toMatchObject({ msg: "admin action", actorId: admin.id, via: "console" });
});

test("platform_viewer sees the pages without a single change button, and every change is refused", async () => {
  await seedSchedule("console-viewer");
  const viewer = await readyPlatformUser(app.db, { role: "platform_viewer" });
  const jar = await signedIn(viewer.email);
  const page = await get(jar, "/console/schedules");
  expect(page.status).toBe(200);
  const html = await page.text();
  expect(html).toContain("console-viewer");
  expect(html).toContain("platform_viewer");
  // the only form with a button is signing out
  expect([...html.matchAll(/<form method="post" action="([^"]+)"/g)].map((m) => m[1])).toEqual([
    "/console/sign-out",
  ]);
  const token = /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? "";
  const refused = await post(jar, "/console/schedules/console-viewer/disable", { csrf: token });
  expect(refused.status).toBe(403);
  expect(await refused.text()).toContain("The platform_viewer role reads; it changes nothing.");
  const [row] = await app.db
    .select({ enabled: jobSchedules.enabled })
    .from(jobSchedules)
    .where(eq(jobSchedules.name, "console-viewer"));
  expect(row?.enabled).toBe(true);
  // signing out is not a change to the platform: allowed
  expect((await post(jar, "/console/sign-out", { csrf: token })).status).toBe(303);
  expect((await get(jar, "/console")).status).toBe(303);
});

test("a forced password change comes first; afterwards the session is over and the new password signs in", async () => {
  const email = `forced${crypto.randomUUID().slice(0, 6)}@example.com`;
  const admin = await readyPlatformUser(app.db);
  const adminJar = await signedIn(admin.email);
  void adminJar;
  const [user] = await app.db
    .insert(users)
    .values({
      tenantId: null,
      email,
      name: "Forced",
      passwordHash: await Bun.password.hash(PASSWORD),
      mustChangePassword: true,
    })
    .returning({ id: users.id });
  await app.db.execute(
    sql`insert into platform_role_bindings (user_id, role) values (${user?.id}, 'platform_admin')`,
  );
  const jar = new Jar();
  const signIn = await post(jar, "/console/sign-in", { email, password: PASSWORD });
  expect(signIn.headers.get("location")).toBe("/console/password");
  expect((await get(jar, "/console/jobs")).headers.get("location")).toBe("/console/password");
  const form = await (await get(jar, "/console/password")).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(form)?.[1] ?? "";
  const fresh = "a brand new operator passphrase 42";
  const differ = await post(jar, "/console/password", {
    csrf,
    currentPassword: PASSWORD,
    newPassword: fresh,
    newPasswordAgain: `${fresh}!`,
  });
  expect(differ.status).toBe(400);
  const changed = await post(jar, "/console/password", {
    csrf,
    currentPassword: PASSWORD,
    newPassword: fresh,
    newPasswordAgain: fresh,
  });
  expect(changed.status).toBe(303);
  expect(changed.headers.get("location")).toBe("/console/sign-in?changed");
  expect(jar.cookies.size).toBe(0);
  const again = await signedIn(email).catch(() => null);
  expect(again).toBeNull();
  const jar2 = new Jar();
  const withNew = await post(jar2, "/console/sign-in", { email, password: fresh });
  expect(withNew.headers.get("location")).toBe("/console");
});

test("a tenant user cannot use the console, and the console is not served on a tenant's host", async () => {
  const tenant = await createTenant(app.db);
  const owner = await createUser(app.db, tenant.id, { role: "owner" });
  // platform sign-in only: a tenant user's e-mail without a tenant is not a platform account
  const response = await post(new Jar(), "/console/sign-in", { email: owner.email, password: PASSWORD });
  expect(response.status).toBe(401);
  // on a tenant's custom domain the console does not exist, signed in or not
  const host = await activeDomain(app.db, tenant.id, `ops${crypto.randomUUID().slice(0, 6)}.customer.test`);
  const admin = await readyPlatformUser(app.db);
  const jar = await signedIn(admin.email);
  for (const path of ["/console", "/console/sign-in"]) {
    const onTenantHost = await app.request(`http://${host}${path}`, { headers: { cookie: jar.header() } });
    expect(onTenantHost.status).toBe(404);
  }
});

test("assets: hashed names, a year of caching, ETag, gzip; an unknown name is 404", async () => {
  const page = await (await get(new Jar(), "/console/sign-in")).text();
  const css = /href="(\/console\/assets\/console\.[0-9a-f]{16}\.css)"/.exec(page)?.[1];
  const js = /src="(\/console\/assets\/htmx\.[0-9a-f]{16}\.js)"/.exec(page)?.[1];
  expect(css).toBeDefined();
  expect(js).toBeDefined();
  const response = await app.request(js ?? "", { headers: { "accept-encoding": "gzip" } });
  expect(response.status).toBe(200);
  expect(response.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
  expect(response.headers.get("content-encoding")).toBe("gzip");
  const etag = response.headers.get("etag") ?? "";
  expect((await app.request(js ?? "", { headers: { "if-none-match": etag } })).status).toBe(304);
  expect((await app.request("/console/assets/htmx.0000000000000000.js")).status).toBe(404);
  const styles = await (await app.request(css ?? "")).text();
  expect(styles).toContain("--accent");
});

test("the overview shows each loop's last tick and last error in this process, redacted", async () => {
  const admin = await readyPlatformUser(app.db);
  const jar = await signedIn(admin.email);
  let ticks = 0;
  const { promise: thirdTick, resolve } = Promise.withResolvers<void>();
  // a real interval loop of this app's deps, failing on its second tick
  const loop = startIntervalLoop(app.deps, "usageReconciliation", {
    intervalMs: 20,
    step: async () => {
      ticks++;
      if (ticks === 3) resolve();
      if (ticks === 2) throw new Error("reconcile failed: Bearer abcdefghijklmnopqrstuvwxyz");
      return false;
    },
  });
  try {
    await thirdTick;
  } finally {
    await loop.stop(5_000);
  }
  expect(ticks).toBeGreaterThanOrEqual(3);
  const page = await (await get(jar, "/console")).text();
  const row = /<tr><th scope="row">usageReconciliation<\/th>(.*?)<\/tr>/s.exec(page)?.[1] ?? "";
  expect(row).toContain("enabled");
  expect(row).toContain("reconcile failed: Bearer [REDACTED]");
  expect(row).not.toContain("abcdefghijklmnopqrstuvwxyz");
  expect(row).toMatch(/<time datetime="[^"]+">/);
  // a loop that has not run in this process says so
  const other = /<tr><th scope="row">subscriptions<\/th>(.*?)<\/tr>/s.exec(page)?.[1] ?? "";
  expect(other).not.toContain("enabled");
});

test("jobs filtered by tenant code or id; ?tenant= stays the API's tenant selector", async () => {
  const admin = await readyPlatformUser(app.db);
  const jar = await signedIn(admin.email);
  const tenant = await createTenant(app.db);
  const [mine] = await app.db
    .insert(backgroundJobs)
    .values({ kind: "console.filter", status: "dead", groupKey: tenant.id })
    .returning({ id: backgroundJobs.id });
  await app.db
    .insert(backgroundJobs)
    .values({ kind: "console.filter", status: "dead", groupKey: crypto.randomUUID() });
  const ids = async (path: string) => {
    const response = await get(jar, path);
    expect(response.status).toBe(200);
    return [...(await response.text()).matchAll(/<a href="\/console\/jobs\/(\d+)">/g)].map((m) =>
      Number(m[1]),
    );
  };
  expect(await ids(`/console/jobs?kind=console.filter&group=${tenant.code}`)).toEqual([mine?.id ?? 0]);
  expect(await ids(`/console/jobs?kind=console.filter&group=${tenant.id}`)).toEqual([mine?.id ?? 0]);
  expect(await ids("/console/jobs?kind=console.filter&group=no-such-tenant")).toEqual([]);
  expect((await ids("/console/jobs?kind=console.filter")).length).toBe(2);
});

test("every change through the console is an audit row naming the actor, and the audit page shows it", async () => {
  const admin = await readyPlatformUser(app.db);
  await seedSchedule("console-audited");
  const jar = await signedIn(admin.email);
  const token = await csrfOf(jar);
  expect((await post(jar, "/console/schedules/console-audited/disable", { csrf: token })).status).toBe(303);
  expect((await post(jar, "/console/schedules/console-audited/run", { csrf: token })).status).toBe(303);
  const rows = await app.db
    .select({
      action: auditEvents.action,
      actorId: auditEvents.actorId,
      targetId: auditEvents.targetId,
      tenantId: auditEvents.tenantId,
    })
    .from(auditEvents)
    .where(eq(auditEvents.targetId, "console-audited"))
    .orderBy(auditEvents.id);
  expect(rows).toEqual([
    { action: "schedule.updated", actorId: admin.id, targetId: "console-audited", tenantId: null },
    { action: "schedule.run", actorId: admin.id, targetId: "console-audited", tenantId: null },
  ]);
  const page = await (await get(jar, "/console/audit?chain=platform&action=schedule.run")).text();
  expect(page).toContain("console-audited");
  expect(page).not.toContain("schedule.updated</th>");
  // a viewer reads the log too
  const viewer = await readyPlatformUser(app.db, { role: "platform_viewer" });
  const viewerJar = await signedIn(viewer.email);
  const read = await get(viewerJar, "/console/audit?targetType=schedule");
  expect(read.status).toBe(200);
  expect(await read.text()).toContain("console-audited");
});

test("a flow is drawn in layers with each job's state and parents, a job shows its result, and the flow cancels", async () => {
  const admin = await readyPlatformUser(app.db);
  const jar = await signedIn(admin.email);
  const flowId = crypto.randomUUID();
  const [parent] = await app.db
    .insert(backgroundJobs)
    .values({
      kind: "console.flow",
      status: "succeeded",
      flowId,
      flowKey: "extract",
      hasDependents: true,
      result: { rows: 42 },
    })
    .returning({ id: backgroundJobs.id });
  const [child] = await app.db
    .insert(backgroundJobs)
    .values({ kind: "console.flow", status: "waiting", flowId, flowKey: "load", waitingOn: 1 })
    .returning({ id: backgroundJobs.id });
  await app.db.insert(jobDependencies).values({ parentId: parent?.id ?? 0, childId: child?.id ?? 0 });
  const page = await (await get(jar, `/console/flows/${flowId}`)).text();
  expect(page).toMatch(
    /Step 1<\/h2><ul><li><a href="\/console\/jobs\/\d+">extract<\/a> <span class="badge [^"]*">succeeded/,
  );
  expect(page).toMatch(
    /Step 2<\/h2><ul><li><a href="\/console\/jobs\/\d+">load<\/a> <span class="badge [^"]*">waiting<\/span><br><span class="muted">after extract/,
  );
  const job = await (await get(jar, `/console/jobs/${parent?.id}`)).text();
  expect(job).toContain("&quot;rows&quot;: 42");
  expect(job).toContain(`href="/console/flows/${flowId}"`);
  const canceled = await post(jar, `/console/flows/${flowId}/cancel`, { csrf: await csrfOf(jar) });
  expect(canceled.status).toBe(303);
  const [row] = await app.db
    .select({ status: backgroundJobs.status })
    .from(backgroundJobs)
    .where(eq(backgroundJobs.id, child?.id ?? 0));
  expect(row?.status).toBe("canceled");
  expect((await get(jar, `/console/flows/${crypto.randomUUID()}`)).status).toBe(404);
});
