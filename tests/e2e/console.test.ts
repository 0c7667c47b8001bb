import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { eq } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { systemCtx } from "../../src/context.ts";
import {
  backgroundJobs,
  jobSchedules,
  subscriptions,
  tenantDomains,
  tenants,
  webhookEndpoints,
} from "../../src/db/schema/index.ts";
import { recordUsage } from "../../src/usage/record-usage.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { CHROMIUM, launchChromium } from "../helpers/chromium.ts";
import { createPlatformAdmin, createTenant, PASSWORD, readyPlatformUser } from "../helpers/identity.ts";

// The operator console in Debian's Chromium (playwright-core), against the real app on a real
// socket: sign in with the forced password change, find a dead job and retry it, pause a schedule,
// read a tenant's usage and a domain's DNS diagnosis, and a platform_viewer who can change nothing.
// Every page is screenshotted at 1280×800 and 390×844 into .data/screenshots (git-ignored), its
// weight measured from the responses, and checked for CSP violations, overflow and keyboard use.

const SHOTS = ".data/screenshots";
const SIZES = { laptop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

let server: ReturnType<typeof Bun.serve> | undefined;
let origin = "";
let browser: Browser;

// the server first: the app's allowed origin is the server's own, known once it listens
beforeAll(() => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request, s) => app.app.fetch(request, { peerAddress: s.requestIP(request)?.address }),
  });
  origin = `http://127.0.0.1:${server.port}`;
});
const app = useTestApp({
  settings: relaxedLimits,
  env: () => ({ BrowserAuth__AllowedOrigins__0: origin, SaasSubscriptions__PastDueGraceDays: "3" }),
});

const NEW_PASSWORD = "an operator's own long passphrase 9";
const fixture = {
  forcedEmail: "",
  adminEmail: `ops${crypto.randomUUID().slice(0, 6)}@example.com`,
  viewerEmail: `viewer${crypto.randomUUID().slice(0, 6)}@example.com`,
  tenantId: "",
  tenantCode: "",
  deadJobId: 0,
  waitingJobId: 0,
  domainId: "",
  hostname: "",
  schedule: "nightly-report",
  pastDueCode: "",
  otherCode: "",
  otherTenantId: "",
};

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`Chromium is missing at ${CHROMIUM}: install it with \`sh scripts/setup.sh --services\``);
  mkdirSync(SHOTS, { recursive: true });
  // the bootstrap administrator: a password someone else chose, to be changed at first sign-in
  fixture.forcedEmail = (await createPlatformAdmin(app.db)).email;
  // the administrator the other tests sign in as, added by the first one, password already changed
  await readyPlatformUser(app.db, { email: fixture.adminEmail, name: "Operator" });
  await readyPlatformUser(app.db, { email: fixture.viewerEmail, name: "Read Only", role: "platform_viewer" });
  const tenant = await createTenant(app.db, `acme${crypto.randomUUID().slice(0, 4)}`);
  const other = await createTenant(app.db);
  // the other tenant is past due since yesterday: its grace ends PastDueGraceDays (3) after that
  await app.db.insert(subscriptions).values({
    tenantId: other.id,
    planCode: "free",
    status: "past_due",
    pastDueSince: new Date("2026-11-22T09:30:00Z"),
  });
  fixture.pastDueCode = other.code;
  fixture.otherCode = other.code;
  fixture.otherTenantId = other.id;
  fixture.tenantId = tenant.id;
  fixture.tenantCode = tenant.code;
  // jobs: one dead job of this tenant among another tenant's and succeeded ones
  const now = Date.now();
  const rows = await app.db
    .insert(backgroundJobs)
    .values([
      {
        kind: "reports.export",
        status: "dead",
        attempts: 10,
        groupKey: tenant.id,
        lastError: "Error: upstream 503",
        payload: { reportId: 7, apiToken: "s3cr3t-value" },
        finishedAt: new Date(now - 600_000),
      },
      {
        kind: "reports.export",
        status: "dead",
        attempts: 10,
        groupKey: other.id,
        lastError: "Error: other tenant",
        finishedAt: new Date(now - 300_000),
      },
      ...Array.from({ length: 40 }, (_, i) => ({
        kind: "emails.send",
        status: "succeeded" as const,
        groupKey: tenant.id,
        finishedAt: new Date(now - i * 80_000),
      })),
      ...Array.from({ length: 5 }, () => ({
        kind: "emails.send",
        status: "pending" as const,
        groupKey: other.id,
      })),
    ])
    .returning({ id: backgroundJobs.id, groupKey: backgroundJobs.groupKey, status: backgroundJobs.status });
  fixture.deadJobId = rows.find((r) => r.status === "dead" && r.groupKey === tenant.id)?.id ?? 0;
  const [waiting] = await app.db
    .insert(backgroundJobs)
    .values({
      kind: "reports.export",
      status: "pending",
      groupKey: tenant.id,
      runAfter: new Date(Date.now() + 3_600_000),
    })
    .returning({ id: backgroundJobs.id });
  fixture.waitingJobId = waiting?.id ?? 0;
  await app.db.insert(jobSchedules).values({
    name: fixture.schedule,
    cron: "0 3 * * *",
    timeZone: "Europe/Berlin",
    kind: "reports.export",
    enabled: true,
  });
  await app.db.insert(webhookEndpoints).values([
    {
      tenantId: tenant.id,
      url: "https://hooks.acme.test/plinth?token=hook-s3cr3t",
      events: ["user.created"],
      description: "CRM sync",
    },
    {
      tenantId: tenant.id,
      url: "https://old.acme.test/in",
      events: ["*"],
      failingSince: new Date("2026-11-20T08:00:00Z"),
    },
    {
      tenantId: tenant.id,
      url: "https://gone.acme.test/in",
      events: ["*"],
      enabled: false,
      disabledReason: "failing for 5 days",
      disabledAt: new Date("2026-11-21T08:00:00Z"),
    },
  ]);
  await recordUsage(app.deps, systemCtx("test", tenant.id), {
    feature: "api_calls",
    quantity: 8_500,
    idempotencyKey: "e2e-1",
  });
  fixture.hostname = `shop${crypto.randomUUID().slice(0, 6)}.acme.test`;
  const [domain] = await app.db
    .insert(tenantDomains)
    .values({
      tenantId: tenant.id,
      hostname: fixture.hostname,
      status: "Failed",
      verificationToken: "plinth-verify-e2e",
      lastFailureCode: "txt_mismatch",
      lastFailureReason: `The TXT record at _plinth.${fixture.hostname} does not hold this domain's verification value.`,
      lastCheckedAt: new Date(now - 60_000),
      checkAttempts: 3,
    })
    .returning({ id: tenantDomains.id });
  fixture.domainId = domain?.id ?? "";
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop(true);
  if (weights.length) writeFileSync(`${SHOTS}/page-weights.json`, `${JSON.stringify(weights, null, 2)}\n`);
});

/** A browser that reaches nothing but the server, and records every CSP complaint and page error. */
async function openContext(
  size: keyof typeof SIZES,
): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: SIZES[size] });
  await context.route("**/*", (route) =>
    route.request().url().startsWith(`${origin}/`) ? route.continue() : route.abort("internetdisconnected"),
  );
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(e.message));
  return { context, page, problems };
}

async function signIn(page: Page, email: string, password: string) {
  await page.goto(`${origin}/console`);
  await page.getByLabel("E-mail").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForLoadState("load");
}

interface Weight {
  view: string;
  path: string;
  /** Bytes on the wire for the page with its assets, empty cache. */
  coldBytes: number;
  /** Bytes of the HTML alone (the assets come from the cache afterwards). */
  htmlBytes: number;
  requests: number;
}
const weights: Weight[] = [];

/** Opens a view at both sizes: screenshots, no CSP problem, no sideways scrolling, its weight. */
async function shoot(view: string, path: string, state: { email: string; password: string }) {
  for (const size of ["laptop", "phone"] as const) {
    const { context, page, problems } = await openContext(size);
    await signIn(page, state.email, state.password);
    let bytes = 0;
    let html = 0;
    let requests = 0;
    // a fresh context has an empty cache: what the first view of this page costs
    const session = await context.newCDPSession(page);
    await session.send("Network.enable");
    await session.send("Network.clearBrowserCache");
    await session.send("Network.setCacheDisabled", { cacheDisabled: true });
    const byId = new Map<string, string>();
    session.on("Network.responseReceived", (e) => byId.set(e.requestId, e.type));
    session.on("Network.loadingFinished", (e) => {
      requests++;
      bytes += e.encodedDataLength;
      if (byId.get(e.requestId) === "Document") html += e.encodedDataLength;
    });
    const response = await page.goto(`${origin}${path}`);
    expect(response?.status()).toBe(200);
    await page.waitForLoadState("networkidle");
    expect(response?.headers()["content-security-policy"]).toContain("default-src 'self'");
    const width = (await page.evaluate("document.documentElement.scrollWidth")) as number;
    expect(width).toBeLessThanOrEqual(SIZES[size].width);
    await page.screenshot({ path: `${SHOTS}/${view}-${size}.png`, fullPage: true });
    expect(problems).toEqual([]);
    if (size === "laptop") weights.push({ view, path, coldBytes: bytes, htmlBytes: html, requests });
    await context.close();
  }
}

const admin = () => ({ email: fixture.adminEmail, password: PASSWORD });

test("sign in with a forced password change, then sign in again with the new password", async () => {
  const { context, page, problems } = await openContext("laptop");
  await page.goto(`${origin}/console/jobs`);
  expect(new URL(page.url()).pathname).toBe("/console/sign-in");
  await page.screenshot({ path: `${SHOTS}/sign-in-laptop.png` });
  await page.getByLabel("E-mail").fill(fixture.forcedEmail);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForURL(`${origin}/console/password`);
  await page.screenshot({ path: `${SHOTS}/password-laptop.png` });
  await page.getByLabel("Current password").fill(PASSWORD);
  await page.getByLabel("New password", { exact: true }).fill(NEW_PASSWORD);
  await page.getByLabel("New password again").fill(NEW_PASSWORD);
  await page.getByRole("button", { name: "Change password" }).click();
  await page.waitForURL(/\/console\/sign-in\?changed/);
  await expect(page.getByText("Password changed. Sign in with the new one.")).toBeDefined();
  expect(await page.getByRole("status").textContent()).toContain("Password changed");
  await page.getByLabel("E-mail").fill(fixture.forcedEmail);
  await page.getByLabel("Password").fill(NEW_PASSWORD);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForURL(`${origin}/console`);
  expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Overview");
  // the cookie is HttpOnly: page script sees no cookie at all
  expect(await page.evaluate("document.cookie")).toBe("");
  expect(problems).toEqual([]);
  await context.close();
}, 60_000);

test("keyboard: the first Tab reaches the skip link, which moves focus to the content; every field has a label", async () => {
  const { context, page } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  await page.goto(`${origin}/console/jobs`);
  await page.keyboard.press("Tab");
  expect(await page.evaluate("document.activeElement?.textContent")).toBe("Skip to content");
  await page.keyboard.press("Enter");
  expect(await page.evaluate("document.activeElement?.id")).toBe("main");
  const unlabelled = await page.evaluate(
    `[...document.querySelectorAll("input:not([type=hidden]), select")]
      .filter((el) => el.labels.length === 0).map((el) => el.outerHTML)`,
  );
  expect(unlabelled).toEqual([]);
  // the filter form works from the keyboard alone
  await page.getByLabel("Status").focus();
  await page.getByLabel("Status").selectOption("dead");
  await page.getByLabel("Kind").focus();
  await page.keyboard.type("reports.export");
  await page.keyboard.press("Enter");
  await page.waitForURL(/status=dead/);
  expect(await page.locator("tbody tr").count()).toBe(2);
  await context.close();
}, 60_000);

test("find a dead job by tenant and retry it: it is pending again, its payload shown without the secret", async () => {
  const { context, page, problems } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  await page.goto(`${origin}/console/jobs`);
  await page.getByLabel("Status").selectOption("dead");
  await page.getByLabel("Tenant (code or id)").fill(fixture.tenantCode);
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/group=/);
  // two dead jobs of this kind exist; one is this tenant's
  const rows = page.locator("tbody tr");
  expect(await rows.count()).toBe(1);
  expect(await rows.first().textContent()).toContain(fixture.tenantCode);
  await page.getByRole("link", { name: String(fixture.deadJobId), exact: true }).click();
  await page.waitForURL(`${origin}/console/jobs/${fixture.deadJobId}`);
  const text = (await page.locator("main").textContent()) ?? "";
  expect(text).toContain("Error: upstream 503");
  expect(text).toContain('"reportId": 7');
  expect(text).not.toContain("s3cr3t-value");
  await page.getByRole("button", { name: "Retry" }).click();
  await page.waitForURL(/done=retried/);
  expect(await page.getByRole("status").textContent()).toContain("pending again");
  const [job] = await app.db
    .select({ status: backgroundJobs.status, attempts: backgroundJobs.attempts })
    .from(backgroundJobs)
    .where(eq(backgroundJobs.id, fixture.deadJobId));
  expect(job).toEqual({ status: "pending", attempts: 0 });
  expect(await page.getByRole("button", { name: "Retry" }).count()).toBe(0);
  expect(problems).toEqual([]);
  await context.close();
}, 60_000);

test("change a waiting job's priority", async () => {
  const { context, page, problems } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  await page.goto(`${origin}/console/jobs/${fixture.waitingJobId}`);
  await page.getByLabel(/Priority/).fill("50");
  await page.getByRole("button", { name: "Set priority" }).click();
  await page.waitForURL(/done=priority/);
  const [job] = await app.db
    .select({ priority: backgroundJobs.priority })
    .from(backgroundJobs)
    .where(eq(backgroundJobs.id, fixture.waitingJobId));
  expect(job?.priority).toBe(50);
  expect(await page.locator("main").textContent()).toContain("50 (higher runs first)");
  expect(problems).toEqual([]);
  await context.close();
}, 60_000);

test("bulk-cancel a filtered set after seeing its count; other jobs are untouched", async () => {
  const { context, page, problems } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  await page.goto(`${origin}/console/jobs?status=pending&group=${fixture.otherCode}`);
  expect(await page.locator("tbody tr").count()).toBe(5);
  // htmx shows the count in place; the same page without script is a page of its own
  await page.getByRole("link", { name: "Cancel the matching jobs…" }).click();
  const confirm = page.getByRole("region", { name: /Cancel 5 job\(s\)\?/ });
  await confirm.waitFor();
  expect(new URL(page.url()).pathname).toBe("/console/jobs");
  expect(await confirm.textContent()).toContain("5 job(s) match this filter now");
  // a job enqueued after the count is not covered by the confirmation
  const [late] = await app.db
    .insert(backgroundJobs)
    .values({
      kind: "emails.send",
      status: "pending",
      groupKey: fixture.otherTenantId,
      createdAt: new Date(Date.now() + 1_000),
    })
    .returning({ id: backgroundJobs.id });
  await confirm.getByRole("button", { name: "Cancel 5 job(s)" }).click();
  await page.waitForURL(/done=cancel/);
  expect(await page.getByRole("status").first().textContent()).toBe("5 job(s) canceled.");
  const other = await app.db
    .select({ id: backgroundJobs.id, status: backgroundJobs.status })
    .from(backgroundJobs)
    .where(eq(backgroundJobs.groupKey, fixture.otherTenantId));
  expect(other.filter((j) => j.status === "canceled")).toHaveLength(5);
  expect(other.find((j) => j.id === late?.id)?.status).toBe("pending");
  // this tenant's jobs were not touched
  const mine = await app.db
    .select({ status: backgroundJobs.status })
    .from(backgroundJobs)
    .where(eq(backgroundJobs.groupKey, fixture.tenantId));
  expect(mine.some((j) => j.status === "canceled")).toBe(false);
  expect(problems).toEqual([]);
  await context.close();
}, 60_000);

test("pause a schedule: its next runs are gone, and it resumes", async () => {
  const { context, page } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  await page.goto(`${origin}/console/schedules`);
  const row = page.getByRole("row", { name: new RegExp(fixture.schedule) });
  expect(await row.textContent()).toContain("enabled");
  await row.getByRole("button", { name: "Pause" }).click();
  await page.waitForURL(/done=disabled/);
  const [paused] = await app.db
    .select({ enabled: jobSchedules.enabled })
    .from(jobSchedules)
    .where(eq(jobSchedules.name, fixture.schedule));
  expect(paused?.enabled).toBe(false);
  expect(await page.getByRole("row", { name: new RegExp(fixture.schedule) }).textContent()).toContain(
    "disabled",
  );
  await page
    .getByRole("row", { name: new RegExp(fixture.schedule) })
    .getByRole("button", { name: "Resume" })
    .click();
  await page.waitForURL(/done=enabled/);
  const [resumed] = await app.db
    .select({ enabled: jobSchedules.enabled })
    .from(jobSchedules)
    .where(eq(jobSchedules.name, fixture.schedule));
  expect(resumed?.enabled).toBe(true);
  // both changes are in the audit log, with the operator as the actor
  await page.getByRole("link", { name: "Audit", exact: true }).click();
  await page.getByLabel("Action").selectOption("schedule.updated");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/action=schedule.updated/);
  const events = page.getByRole("row", { name: /schedule\.updated/ });
  expect(await events.count()).toBe(2);
  expect(await events.first().textContent()).toContain(fixture.schedule);
  // at 1280 px a date stays on one line (one box for its text) and the details wrap inside their column
  const dateLines = await page.evaluate(
    "Math.max(...[...document.querySelectorAll('td.when time')].map((t) => t.getClientRects().length))",
  );
  expect(dateLines).toBe(1);
  for (const box of await Promise.all(
    (await page.locator("td.details").all()).map((cell) => cell.boundingBox()),
  ))
    expect(box?.width ?? 0).toBeLessThanOrEqual(28 * 16 + 40);
  // the date filters are typed as UTC text, never the browser's mm/dd/yyyy
  for (const label of ["From (UTC)", "Before (UTC)"]) {
    expect(await page.getByLabel(label).getAttribute("type")).toBe("text");
    expect(await page.getByLabel(label).getAttribute("placeholder")).toBe("2026-11-26T10:00:00");
  }
  await context.close();
}, 60_000);

test("read a tenant's usage against its limit and its webhook endpoints' health, found by search", async () => {
  const { context, page } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  await page.goto(`${origin}/console/tenants`);
  await page.getByLabel("Code or name").fill(fixture.tenantCode.slice(0, 6));
  await page.getByRole("button", { name: "Search" }).click();
  await page.getByRole("link", { name: fixture.tenantCode }).click();
  await page.waitForURL(`${origin}/console/tenants/${fixture.tenantId}`);
  const usage = page.getByRole("row", { name: /api_calls/ });
  const cells = await usage.locator("td").allTextContents();
  // feature, period, used, limit (the default plan: 10,000 a month)
  expect(cells.slice(1, 3)).toEqual(["8,500", "10,000"]);
  // Plinth counts api_calls itself (issue #30): no badge sends the reader to the application
  expect(await usage.locator("th").textContent()).not.toContain("recorded by your application");
  expect(await usage.locator("meter").getAttribute("value")).toBe("8500");
  expect(await page.getByRole("link", { name: fixture.hostname }).count()).toBe(1);
  // webhook endpoints' health, and never a token from a destination's query string
  const health = async (host: string) =>
    (
      await page
        .getByRole("row", { name: new RegExp(host) })
        .locator("td")
        .allTextContents()
    ).join(" | ");
  expect(await health("hooks.acme.test")).toContain("delivering");
  expect(await health("old.acme.test")).toContain("failing since 2026-11-20 08:00:00Z");
  expect(await health("gone.acme.test")).toContain("disabled failing for 5 days");
  const text = (await page.locator("main").textContent()) ?? "";
  expect(text).toContain("https://hooks.acme.test/plinth?…");
  expect(text).not.toContain("hook-s3cr3t");
  await context.close();
}, 60_000);

test("a tenant past due: on the overview with its grace deadline; suspended and reactivated from its page", async () => {
  const { context, page } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  const item = page.getByRole("listitem").filter({ hasText: fixture.pastDueCode });
  expect(await item.textContent()).toContain("grace ends 2026-11-25 09:30:00Z");
  await item.getByRole("link", { name: fixture.pastDueCode }).click();
  await page.waitForLoadState("load");
  const facts = (await page.locator("section", { hasText: "Plan and subscription" }).textContent()) ?? "";
  expect(facts).toContain("past_due");
  expect(facts).toContain("Past due since2026-11-22 09:30:00Z");
  expect(facts).toContain("Grace ends2026-11-25 09:30:00Z (then suspended)");
  // suspend it now, then reactivate it: the subscription's own moves, as the admin API makes them
  await page.getByRole("button", { name: "Suspend" }).click();
  await page.waitForURL(/done=suspended/);
  expect(await page.locator("section", { hasText: "Plan and subscription" }).textContent()).toContain(
    "suspended",
  );
  await page.getByRole("button", { name: "Reactivate" }).click();
  await page.waitForURL(/done=reactivated/);
  const [row] = await app.db
    .select({ status: subscriptions.status })
    .from(subscriptions)
    .innerJoin(tenants, eq(tenants.id, subscriptions.tenantId))
    .where(eq(tenants.code, fixture.pastDueCode));
  expect(row?.status).toBe("active");
  await context.close();
}, 60_000);

test("read a domain's DNS diagnosis: expected TXT against what DNS answered, and ask for a check", async () => {
  const { context, page } = await openContext("laptop");
  await signIn(page, admin().email, admin().password);
  await page.goto(`${origin}/console/domains?status=Failed`);
  await page.getByRole("link", { name: fixture.hostname }).click();
  await page.waitForURL(`${origin}/console/tenants/${fixture.tenantId}/domains/${fixture.domainId}`);
  const txt = page.getByRole("row", { name: /^TXT/ });
  const cells = await txt.locator("td").allTextContents();
  expect(cells).toEqual(["plinth-verify-e2e", "a different value", "mismatch"]);
  expect(await page.getByRole("row", { name: /^CNAME/ }).textContent()).toContain(
    "the TXT step failed first",
  );
  await page.getByRole("button", { name: "Check now" }).click();
  await page.waitForURL(/done=check/);
  const [row] = await app.db
    .select({ nextCheckAt: tenantDomains.nextCheckAt })
    .from(tenantDomains)
    .where(eq(tenantDomains.id, fixture.domainId));
  expect(Math.abs((row?.nextCheckAt?.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
  await context.close();
}, 60_000);

test("platform_viewer: every page readable, no change button anywhere, and the API refuses its changes", async () => {
  const { context, page, problems } = await openContext("laptop");
  await signIn(page, fixture.viewerEmail, PASSWORD);
  const paths = [
    "/console",
    "/console/jobs",
    `/console/jobs/${fixture.deadJobId}`,
    `/console/jobs/${fixture.waitingJobId}`,
    "/console/schedules",
    "/console/tenants",
    `/console/tenants/${fixture.tenantId}`,
    "/console/domains",
    `/console/tenants/${fixture.tenantId}/domains/${fixture.domainId}`,
    "/console/audit",
  ];
  // make the dead job dead again, so a Retry button would show for an administrator
  await app.db.update(backgroundJobs).set({ status: "dead" }).where(eq(backgroundJobs.id, fixture.deadJobId));
  for (const path of paths) {
    const response = await page.goto(`${origin}${path}`);
    expect(response?.status()).toBe(200);
    // GET forms (filters) change nothing; any button of a POST form would
    const buttons = await page.locator("main form[method=post], main form:not([method=get]) button").count();
    expect(`${path}: ${buttons}`).toBe(`${path}: 0`);
  }
  // through the browser's own session, a crafted change is refused (403), and so is the admin API
  const refused = await page.evaluate(`(async () => {
    const token = document.querySelector('input[name="csrf"]').value;
    const headers = { "x-csrf-token": token };
    const viaConsole = await fetch("/console/jobs/${fixture.deadJobId}/retry", { method: "POST", headers });
    const viaApi = await fetch("/api/admin/jobs/${fixture.deadJobId}/retry", { method: "POST", headers });
    const read = await fetch("/api/admin/jobs?status=dead");
    return [viaConsole.status, viaApi.status, read.status];
  })()`);
  expect(refused).toEqual([403, 403, 200]);
  const [job] = await app.db
    .select({ status: backgroundJobs.status })
    .from(backgroundJobs)
    .where(eq(backgroundJobs.id, fixture.deadJobId));
  expect(job?.status).toBe("dead");
  expect(problems.filter((p) => !/status of 403/.test(p))).toEqual([]);
  await context.close();
}, 60_000);

test("screenshots and page weight of every view at 1280×800 and 390×844", async () => {
  const views: [string, string][] = [
    ["overview", "/console"],
    ["jobs", "/console/jobs"],
    ["job", `/console/jobs/${fixture.deadJobId}`],
    ["bulk", "/console/jobs/bulk?action=retry&status=dead"],
    ["schedules", "/console/schedules"],
    ["tenants", "/console/tenants"],
    ["tenant", `/console/tenants/${fixture.tenantId}`],
    ["domains", "/console/domains"],
    ["audit", "/console/audit"],
    ["domain", `/console/tenants/${fixture.tenantId}/domains/${fixture.domainId}`],
  ];
  for (const [view, path] of views) await shoot(view, path, admin());
  console.log(
    weights
      .map(
        (w) => `${w.view.padEnd(10)} cold ${w.coldBytes} B (${w.requests} requests), html ${w.htmlBytes} B`,
      )
      .join("\n"),
  );
  for (const w of weights) expect(w.coldBytes).toBeLessThan(60_000);
}, 240_000);
