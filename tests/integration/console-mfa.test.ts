import { expect, test } from "bun:test";
import { URI } from "otpauth";
import { ManualClock } from "../../src/clock.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { Jar } from "../helpers/cookie-jar.ts";
import { newMasterKey, PASSWORD, readyPlatformUser } from "../helpers/identity.ts";

// Issue #33 point 7: the console's own second factors (enrol an authenticator app, backup codes,
// remove) and its step-up prompt, which asks for a fresh factor and runs the change again.

const ORIGIN = "https://ops.plinth.test";
const clock = new ManualClock(Date.now());
const app = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "console-mfa-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
  env: { BrowserAuth__AllowedOrigins__0: ORIGIN },
});

const post = (jar: Jar, path: string, body: Record<string, string>, referer?: string) =>
  app.request(path, {
    method: "POST",
    headers: {
      cookie: jar.header(),
      origin: ORIGIN,
      "content-type": "application/x-www-form-urlencoded",
      ...(referer ? { referer: `${ORIGIN}${referer}` } : {}),
    },
    body: new URLSearchParams(body).toString(),
  });
const get = (jar: Jar, path: string) => app.request(path, { headers: { cookie: jar.header() } });
const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
const htmlText = (text: string) =>
  text.replaceAll("&amp;", "&").replaceAll("&#39;", "'").replaceAll("&quot;", '"');
const codesOf = (page: string) =>
  [...page.matchAll(/<li><code>([^<]+)<\/code><\/li>/g)].map((m) => m[1] ?? "");

async function consoleSignIn(email: string): Promise<{ jar: Jar; csrf: string }> {
  const jar = new Jar();
  jar.take(await post(jar, "/console/sign-in", { email, password: PASSWORD }));
  const page = await (await get(jar, "/console/mfa")).text();
  return { jar, csrf: csrfOf(page) };
}

/** Enrols an authenticator app through the console; answers the app (otpauth) and the backup codes. */
async function enrol(jar: Jar, csrf: string) {
  const started = await post(jar, "/console/mfa/totp", { csrf });
  expect(started.status).toBe(200);
  const page = await started.text();
  expect(page).toContain("<svg");
  const uri = htmlText(/<code class="secret">([^<]+)<\/code>/.exec(page)?.[1] ?? "");
  const authenticator = URI.parse(uri);
  const wrong = await post(jar, "/console/mfa/totp/confirm", { csrf, code: "000000" });
  expect(wrong.status).toBe(400);
  const wrongPage = await wrong.text();
  expect(wrongPage).toContain("That code does not match");
  expect(wrongPage).not.toContain("<svg"); // the QR code is shown once
  const code = authenticator.generate({ timestamp: clock.now().getTime() });
  const confirmed = await post(jar, "/console/mfa/totp/confirm", { csrf, code });
  expect(confirmed.status).toBe(200);
  const codes = codesOf(await confirmed.text());
  expect(codes).toHaveLength(10);
  return { authenticator, codes, code };
}

test("a staff member enrols an authenticator app: the QR code, a first code, ten backup codes once; no inline script", async () => {
  const staff = await readyPlatformUser(app.db, { role: "platform_viewer" });
  const { jar, csrf } = await consoleSignIn(staff.email);
  const first = await get(jar, "/console/mfa");
  expect(first.status).toBe(200);
  expect(first.headers.get("content-security-policy")).toContain("script-src 'self'");
  const page = await first.text();
  expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  expect(page).not.toMatch(/\son[a-z]+="/);
  expect(page).toContain("No second factor yet");

  await enrol(jar, csrf);
  const after = await (await get(jar, "/console/mfa")).text();
  expect(after).toContain("enrolled");
  expect(after).toContain("10 unused backup codes left");
  expect(after).not.toContain("otpauth://");
  expect(after).toContain('action="/console/mfa/totp/remove"');
});

test("a change that needs a fresh factor asks for one, refuses a wrong or replayed code, then runs the change", async () => {
  const staff = await readyPlatformUser(app.db);
  const { jar, csrf } = await consoleSignIn(staff.email);
  const { authenticator, codes, code: used } = await enrol(jar, csrf);

  const asked = await post(jar, "/console/mfa/backup-codes", { csrf });
  expect(asked.status).toBe(401);
  const prompt = await asked.text();
  expect(prompt).toContain("Confirm it is you");
  expect(prompt).toContain('action="/console/mfa/backup-codes"');
  expect(prompt).toContain('name="stepUpCode"');
  expect(prompt).toContain('name="stepUpBackupCode"');
  expect(codesOf(prompt)).toEqual([]);

  // the confirmation's code again: replay refused, nothing changed
  const replayed = await post(jar, "/console/mfa/backup-codes", { csrf, stepUpCode: used });
  expect(replayed.status).toBe(401);
  expect(await replayed.text()).toContain("That code is wrong or was used already.");

  clock.advance(30_000);
  const fresh = authenticator.generate({ timestamp: clock.now().getTime() });
  const done = await post(jar, "/console/mfa/backup-codes", { csrf, stepUpCode: fresh });
  expect(done.status).toBe(200);
  const renewed = codesOf(await done.text());
  expect(renewed).toHaveLength(10);
  expect(renewed.some((c) => codes.includes(c))).toBe(false);

  // later (past Authentication:Mfa:StepUpMaxAgeMinutes) a backup code answers the prompt
  clock.advance(11 * 60_000);
  const removeAsked = await post(jar, "/console/mfa/totp/remove", { csrf });
  expect(removeAsked.status).toBe(401);
  const removed = await post(jar, "/console/mfa/totp/remove", { csrf, stepUpBackupCode: renewed[0] ?? "" });
  expect(removed.status).toBe(303);
  expect(removed.headers.get("location")).toBe("/console/mfa?removed");
  const page = await (await get(jar, "/console/mfa?removed")).text();
  expect(page).toContain("Authenticator removed.");
  expect(page).toContain("No second factor yet");
});

test("the prompt never writes a password back: it steps up alone and returns to the page of the change", async () => {
  const staff = await readyPlatformUser(app.db);
  const { jar, csrf } = await consoleSignIn(staff.email);
  const { authenticator } = await enrol(jar, csrf);
  clock.advance(30_000);

  const typed = {
    csrf,
    currentPassword: PASSWORD,
    newPassword: "another-long-password-1",
    newPasswordAgain: "another-long-password-1",
  };
  const asked = await post(jar, "/console/password", typed, "/console/password");
  expect(asked.status).toBe(401);
  const prompt = await asked.text();
  expect(prompt).not.toContain(PASSWORD);
  expect(prompt).not.toContain("another-long-password-1");
  expect(prompt).toContain('action="/console/step-up"');
  expect(prompt).toContain('name="back" value="/console/password"');

  // without a factor the prompt asks again; with one it goes back to the page
  expect((await post(jar, "/console/step-up", { csrf, back: "/console/password" })).status).toBe(401);
  const code = authenticator.generate({ timestamp: clock.now().getTime() });
  const stepped = await post(jar, "/console/step-up", { csrf, back: "/console/password", stepUpCode: code });
  expect(stepped.status).toBe(303);
  expect(stepped.headers.get("location")).toBe("/console/password");
  const changed = await post(jar, "/console/password", typed);
  expect(changed.status).toBe(303);
  expect(changed.headers.get("location")).toBe("/console/sign-in?changed");

  // a page's script (adding a passkey) sends the user to the prompt by itself: no open redirect
  const other = await consoleSignIn((await readyPlatformUser(app.db)).email);
  const alone = await get(other.jar, "/console/step-up?back=https://evil.test/");
  expect(alone.status).toBe(200);
  expect(await alone.text()).toContain('name="back" value="/console"');
});
