import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, createApp } from "../../src/app.ts";
import type { Deps } from "../../src/deps.ts";
import { clientIp } from "../../src/http/client-ip.ts";
import { assertAllowed } from "../../src/security/windows.ts";
import { addProbeRoutes, relaxedLimits, testConfig, testDeps, useTestApp } from "../helpers/app.ts";
import { createTenant, createUser, PASSWORD } from "../helpers/identity.ts";
import { type OwnRedis, ownRedisServer } from "../helpers/redis-server.ts";

/** Production mode against a Redis this file owns, so it can be stopped and started again. */
const settings = {
  ...relaxedLimits,
  "Authentication:Password:AttemptLimit": "3",
  "Cache:CommandTimeoutMs": "300",
};

let redis: OwnRedis;
let deps: Deps;
let app: App;

beforeAll(async () => {
  redis = await ownRedisServer();
});
const h = useTestApp({ settings, cacheUrl: () => redis.url, environment: "Production", probeRoutes: true });
const t = h.testDatabase;
beforeAll(async () => {
  deps = h.deps;
  app = h.app;
  const tenant = await createTenant(t.database.db);
  const user = await createUser(t.database.db, tenant.id);
  account = { email: user.email, tenant: tenant.code };
  // a window-protected route outside /api/auth/: only the security window stands in front of it
  app.post("/api/probe-window", async (c) => {
    assertAllowed(await deps.windows.consume("smsSend", { phone: "+15550001111", ip: clientIp(c) }));
    return c.json({ sent: true });
  });
});
// after the harness has closed the app's cache client
afterAll(() => redis.stop());

const peer = { peerAddress: "198.51.100.7" };
let account: { email: string; tenant: string };
/** The real sign-in route: "right" is the user's password, anything else is wrong. */
const signIn = (target: App, password: string) =>
  target.request(
    "/api/auth/login",
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...account, password: password === "right" ? PASSWORD : "wrong-password-123" }),
    },
    peer,
  );
const login = (password: string) => signIn(app, password);
const ready = () => app.request("/api/health/ready", {}, peer);

async function eventually(check: () => Promise<boolean>, timeoutMs = 8_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await Bun.sleep(100);
  }
  throw new Error("condition not met in time");
}

describe("Production with the cache going away and coming back", () => {
  test("with the cache up: ready, logins answered", async () => {
    expect(deps.config.environment).toBe("Production");
    expect(deps.counters.kind).toBe("cache");
    expect((await ready()).status).toBe(200);
    expect((await login("wrong")).status).toBe(401);
    expect((await login("right")).status).toBe(200);
  });

  test("cache down: readiness 503, login 503 (never 200, never unlimited), windows fail closed", async () => {
    await redis.stop();
    const readiness = await ready();
    expect(readiness.status).toBe(503);
    const health = (await readiness.json()) as { checks: Record<string, { status: string }[]> };
    expect(health.checks["cache:responseTime"]?.[0]?.status).toBe("fail");
    expect(health.checks["database:responseTime"]?.[0]?.status).toBe("pass");

    for (let i = 0; i < 10; i++) {
      const res = await login(i % 2 ? "right" : "wrong");
      expect(res.status).toBe(503);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
      expect(((await res.json()) as { code: string }).code).toBe("unavailable");
    }
    // the window itself fails closed even where no auth rate limit stands in front of it
    const window = await app.request("/api/probe-window", { method: "POST" }, peer);
    expect(window.status).toBe(503);
    expect(((await window.json()) as { code: string }).code).toBe("unavailable");
    // other routes stay up: the global limit lets them through (documented in docs/cache.md)
    expect((await app.request("/api/probe", {}, peer)).status).toBe(200);
    // liveness never touches the cache
    expect((await app.request("/api/health", {}, peer)).status).toBe(200);
  });

  test("cache back: the same process recovers without a restart", async () => {
    await redis.start();
    await eventually(async () => (await ready()).status === 200);
    expect((await login("wrong")).status).toBe(401);
    expect((await login("right")).status).toBe(200);
    expect((await app.request("/api/probe-window", { method: "POST" }, peer)).status).toBe(200);
  });

  test("after recovery the windows count again: the N+1th attempt is refused", async () => {
    for (let i = 0; i < 3; i++) expect((await login("wrong")).status).toBe(401);
    const locked = await login("right");
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});

describe("Production with an unreachable Upstash endpoint", () => {
  test("readiness 503 and login 503", async () => {
    const config = testConfig({
      settings: { ...settings, "ConnectionStrings:CacheToken": "token-for-nothing" },
      cacheUrl: "http://127.0.0.1:1",
      environment: "Production",
    });
    const upstashDeps = await testDeps(config, { database: t.database, waitForCache: false });
    const upstashApp = addProbeRoutes(createApp(upstashDeps), upstashDeps);
    expect(upstashDeps.cache?.adapter).toBe("upstash");
    expect((await upstashApp.request("/api/health/ready", {}, peer)).status).toBe(503);
    const res = await signIn(upstashApp, "right");
    expect(res.status).toBe(503);
  });
});
