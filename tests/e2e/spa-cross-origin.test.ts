import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { useTestDatabase } from "../helpers/app.ts";
import { type OwnCaddy, ownCaddy } from "../helpers/caddy.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { appRoleEnv } from "../helpers/database.ts";
import { cleanEnv, ROOT } from "../helpers/process.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";
import { freePort, type OwnRedis, ownRedisServer } from "../helpers/redis-server.ts";

/**
 * A single-page app on another origin than the API, in Chromium, against the Production settings
 * `keys:generate --origin` writes (docs/runbooks/first-install.md) behind deploy/caddy/Caddyfile: the
 * credentialed cookie sign-in, the password change and sign-out with `X-CSRF-Token`, as docs/auth.md
 * describes the browser flow. Both origins are HTTPS (the session cookie is `__Host-`, Secure).
 */

const API_HOST = "api.example.test";
const APP_HOST = "app.example.test";
const root = mkdtempSync(join(tmpdir(), "plinth-spa-"));
const keys = join(root, "keys");
const t = useTestDatabase({ empty: true });
const email = "admin@example.test";
const password = randomBytes(18).toString("base64");
let redis: OwnRedis;
let api: Child;
let caddy: OwnCaddy;
let app: ReturnType<typeof Bun.serve>;
let browser: Browser;
let appOrigin = "";

function run(command: string, env: Record<string, string | undefined> = {}) {
  const proc = Bun.spawnSync(["sh", "-c", command], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString() + proc.stderr.toString() };
}

beforeAll(async () => {
  redis = await ownRedisServer();
  const appPort = await freePort();
  appOrigin = `https://${APP_HOST}:${appPort}`;
  expect(run(`bun run keys:generate --out ${keys} --host ${API_HOST} --origin ${appOrigin}`).code).toBe(0);
  const settings = Object.fromEntries(
    readFileSync(join(keys, "production.env"), "utf8")
      .split("\n")
      .filter((l) => /^[A-Za-z_]\w*=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
  const env = { ...settings, DATABASE_URL: t.url, CACHE_URL: redis.url };
  const migrate = run(`exec bun run migrate --bootstrap-platform-admin`, {
    ...env,
    PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: email,
    PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: password,
    PLINTH_BOOTSTRAP_PLATFORM_ADMIN_NAME: "First Admin",
  });
  expect(migrate.code).toBe(0);

  const apiPort = await freePort();
  api = spawnBun([join(ROOT, "src/server.ts")], {
    ...env,
    ...appRoleEnv(t.url), // the API as its role (Production refuses the owner)
    PORT: String(apiPort),
    // Caddy's address, as first-install.md says
    Tenancy__Resolution__TrustedProxies__0: "127.0.0.1",
  });
  await api.waitForLine((l) => l.includes('"msg":"listening"'), 30_000);
  caddy = await ownCaddy(apiPort);
  await caddy.caReady();

  // the app's own origin: one HTML page, served over HTTPS with a certificate of its own
  const cert = join(root, "app.crt");
  const key = join(root, "app.key");
  expect(
    run(
      `openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=${APP_HOST} -keyout ${key} -out ${cert} 2>/dev/null`,
    ).code,
  ).toBe(0);
  app = Bun.serve({
    hostname: "127.0.0.1",
    port: appPort,
    tls: { cert: readFileSync(cert, "utf8"), key: readFileSync(key, "utf8") },
    fetch: () =>
      new Response("<!doctype html><title>app</title><p>app", { headers: { "content-type": "text/html" } }),
  });
  browser = await launchChromium([
    `--host-resolver-rules=MAP ${API_HOST} 127.0.0.1, MAP ${APP_HOST} 127.0.0.1`,
  ]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  app?.stop(true);
  await caddy?.stop();
  await redis?.stop();
  rmSync(root, { recursive: true, force: true });
});

test("an app on another origin signs in with the session cookie, changes the password and signs out with X-CSRF-Token", async () => {
  // the certificates are Caddy's local CA's and the app's own: trusted for this test only
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  await page.goto(`${appOrigin}/`);
  const apiOrigin = `https://${API_HOST}:${caddy.httpsPort}`;
  const newPassword = randomBytes(18).toString("base64");
  // the page's own script, as a single-page app would run it (docs/auth.md, "Browser sessions")
  const steps = await page.evaluate(
    async ({ apiOrigin, email, password, newPassword }) => {
      const call = async (path: string, init: RequestInit = {}) => {
        const response = await fetch(`${apiOrigin}${path}`, { credentials: "include", ...init });
        const text = await response.text();
        return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
      };
      const json = (body: unknown, csrf?: string) => ({
        method: "POST",
        headers: { "content-type": "application/json", ...(csrf ? { "x-csrf-token": csrf } : {}) },
        body: JSON.stringify(body),
      });
      const first = await call("/api/auth/browser/login", json({ email, password }));
      const csrf = String(first.body.csrfToken);
      const changeWithoutCsrf = await call(
        "/api/auth/password",
        json({ currentPassword: password, newPassword }),
      );
      const change = await call("/api/auth/password", json({ currentPassword: password, newPassword }, csrf));
      const afterChange = await call("/api/auth/me");
      const second = await call("/api/auth/browser/login", json({ email, password: newPassword }));
      const me = await call("/api/auth/me");
      const logoutWithoutCsrf = await call("/api/auth/browser/logout", { method: "POST" });
      const logout = await call("/api/auth/browser/logout", {
        method: "POST",
        headers: { "x-csrf-token": String(second.body.csrfToken) },
      });
      const afterLogout = await call("/api/auth/me");
      return {
        first: [first.status, first.body.passwordChangeRequired],
        changeWithoutCsrf: changeWithoutCsrf.status,
        change: change.status,
        afterChange: afterChange.status,
        second: [second.status, second.body.passwordChangeRequired],
        me: [me.status, (me.body.user as { email?: string } | undefined)?.email],
        logoutWithoutCsrf: logoutWithoutCsrf.status,
        logout: logout.status,
        afterLogout: afterLogout.status,
      };
    },
    { apiOrigin, email, password, newPassword },
  );
  expect(steps).toEqual({
    first: [200, true],
    changeWithoutCsrf: 403,
    change: 204,
    afterChange: 401,
    second: [200, false],
    me: [200, email],
    logoutWithoutCsrf: 403,
    logout: 204,
    afterLogout: 401,
  });
  await context.close();
}, 60_000);
