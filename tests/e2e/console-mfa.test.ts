import { afterAll, beforeAll, expect, test } from "bun:test";
import { and, eq, isNull } from "drizzle-orm";
import { URI } from "otpauth";
import type { Browser } from "playwright-core";
import { ManualClock } from "../../src/clock.ts";
import { sessions } from "../../src/db/schema/index.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { cspComplaints, launchChromium, signInToConsole } from "../helpers/chromium.ts";
import { newMasterKey, PASSWORD, readyPlatformUser } from "../helpers/identity.ts";

// Issue #33 point 7 in Debian's Chromium: a staff member enrols an authenticator app in the console
// (QR code, a first code from `otpauth`, the backup codes), then a change that needs a fresh second
// factor shows the step-up prompt, which takes a new code and runs the change. Under the console's
// CSP: any complaint fails the test, and the page's scripts load.

let server: ReturnType<typeof Bun.serve> | undefined;
let port = 0;
let browser: Browser;
beforeAll(async () => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request, s) => app.app.fetch(request, { peerAddress: s.requestIP(request)?.address }),
  });
  port = server.port ?? 0;
  browser = await launchChromium(["--host-resolver-rules=MAP localhost 127.0.0.1"]);
}, 60_000);
const clock = new ManualClock();
const app = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "console-mfa-e2e",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
  env: () => ({ BrowserAuth__AllowedOrigins__0: `http://localhost:${port}` }),
});

afterAll(async () => {
  await browser?.close();
  server?.stop(true);
});

test("enrol an authenticator app in the console, then the step-up prompt takes a fresh code and runs the change", async () => {
  const staff = await readyPlatformUser(app.db);
  const page = await (await browser.newContext()).newPage();
  const complaints = cspComplaints(page, { pageErrors: true });
  const failed: string[] = [];
  page.on("requestfailed", (request) => failed.push(request.url()));
  const base = `http://localhost:${port}`;

  await signInToConsole(page, base, staff.email, PASSWORD);

  await page.goto(`${base}/console/mfa`);
  expect(await page.locator("main").textContent()).toContain("No second factor yet");
  // the page's scripts (htmx) loaded under the policy
  expect(await page.evaluate(() => typeof (globalThis as { htmx?: unknown }).htmx)).toBe("object");
  await Promise.all([
    page.waitForURL(`${base}/console/mfa/totp`),
    page.click("text=Set up an authenticator app"),
  ]);
  expect(await page.locator("figure.qr svg").count()).toBe(1);
  const authenticator = URI.parse((await page.locator("code.secret").textContent()) ?? "");
  await page.fill("#totp-code", authenticator.generate({ timestamp: clock.now().getTime() }));
  await Promise.all([page.waitForURL(`${base}/console/mfa/totp/confirm`), page.click("main form button")]);
  expect(await page.locator("h1").textContent()).toBe("Your backup codes");
  const first = await page.locator("ol.backup-codes code").allTextContents();
  expect(first).toHaveLength(10);

  // a fresh set needs a fresh factor: the prompt, then the change itself
  clock.advance(30_000);
  await page.goto(`${base}/console/mfa`);
  await Promise.all([
    page.waitForURL(`${base}/console/mfa/backup-codes`),
    page.click("text=New backup codes"),
  ]);
  expect(await page.locator("h1").textContent()).toBe("Confirm it is you");
  await page.fill("#step-up-code", "123456");
  await Promise.all([page.waitForLoadState("load"), page.click("#step-up button[type=submit]")]);
  expect(await page.locator("main").textContent()).toContain("That code is wrong");
  await page.fill("#step-up-code", authenticator.generate({ timestamp: clock.now().getTime() }));
  await Promise.all([page.waitForLoadState("load"), page.click("#step-up button[type=submit]")]);
  expect(await page.locator("h1").textContent()).toBe("Your backup codes");
  const second = await page.locator("ol.backup-codes code").allTextContents();
  expect(second).toHaveLength(10);
  expect(second.some((code) => first.includes(code))).toBe(false);

  // the session now says so (RFC 8176): a second factor proved on it
  const [session] = await app.db
    .select({ amr: sessions.amr })
    .from(sessions)
    .where(and(eq(sessions.userId, staff.id), isNull(sessions.revokedAt)));
  expect(session?.amr).toContain("mfa");
  expect(complaints).toEqual([]);
  expect(failed).toEqual([]);
  await page.close();
}, 60_000);

test("the step-up prompt takes a passkey (CDP virtual authenticator), for a form change and for a change the page's script makes", async () => {
  const staff = await readyPlatformUser(app.db, { role: "platform_viewer" });
  const page = await (await browser.newContext()).newPage();
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  const options = {
    protocol: "ctap2",
    transport: "internal",
    hasResidentKey: true,
    hasUserVerification: true,
    isUserVerified: true,
    automaticPresenceSimulation: true,
  } as const;
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", { options });
  const complaints = cspComplaints(page, { pageErrors: true });
  const base = `http://localhost:${port}`;
  await signInToConsole(page, base, staff.email, PASSWORD);
  // a first passkey needs no step-up (no factor yet)
  await page.goto(`${base}/console/passkeys`);
  await page.fill("#passkey-name", "First key");
  await Promise.all([page.waitForURL(`${base}/console/passkeys?added`), page.click("#passkey-add button")]);

  // a form change: the prompt offers the passkey, which steps up through the API, then the change runs
  clock.advance(11 * 60_000);
  await page.goto(`${base}/console/mfa`);
  await Promise.all([
    page.waitForURL(`${base}/console/mfa/totp`),
    page.click("text=Set up an authenticator app"),
  ]);
  expect(await page.locator("h1").textContent()).toBe("Confirm it is you");
  await Promise.all([page.waitForSelector("figure.qr svg"), page.click("#passkey-step-up")]);
  expect(await page.locator("h1").textContent()).toBe("Set up an authenticator app");

  // a change the page's script makes through the API (a second passkey), past the step-up's age:
  // the API's 401 sends the browser to the prompt, the passkey answers it, back on the page it works
  clock.advance(11 * 60_000);
  await page.goto(`${base}/console/passkeys`);
  await page.fill("#passkey-name", "Second key");
  await Promise.all([page.waitForURL(/\/console\/step-up\?back=/), page.click("#passkey-add button")]);
  await Promise.all([page.waitForURL(`${base}/console/passkeys`), page.click("#passkey-step-up")]);
  // another device for the second passkey (an authenticator holds one passkey per user and host)
  await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
  await cdp.send("WebAuthn.addVirtualAuthenticator", { options });
  await page.fill("#passkey-name", "Second key");
  await Promise.all([page.waitForURL(`${base}/console/passkeys?added`), page.click("#passkey-add button")]);
  expect(await page.locator("tbody th").allTextContents()).toEqual(["First key", "Second key"]);
  expect(complaints).toEqual([]);
  await page.close();
}, 60_000);
