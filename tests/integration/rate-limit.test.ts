import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, createApp } from "../../src/app.ts";
import { ManualClock } from "../../src/clock.ts";
import type { Deps } from "../../src/deps.ts";
import { rateLimitPolicies } from "../../src/http/middleware/rate-limit.ts";
import { addProbeRoutes, testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { REDIS_URL, rawRedis, uniquePrefix } from "../helpers/cache.ts";
import { createTenant, createUser, signIn } from "../helpers/identity.ts";
import { rsaKeys } from "../helpers/production-env.ts";

const settings = {
  "RateLimiting:Global:PermitLimit": "5",
  "RateLimiting:Global:WindowSeconds": "60",
  "RateLimiting:Auth:PermitLimit": "2",
  "RateLimiting:Auth:WindowSeconds": "60",
  "Tenancy:Resolution:TrustedProxies:0": "10.0.0.0/8",
  // one signing key for both instances: a token signed in on one is valid on the other
  "Security:Jwt:CurrentKeyId": "rate-limit",
  "Security:Jwt:PrivateKey": rsaKeys().privateKeyPem,
};

const raw = rawRedis();
const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await raw.cleanup(prefix);
  raw.close();
});
const t = useTestDatabase();

const get = (app: App, path: string, peerAddress: string, headers: Record<string, string> = {}) =>
  app.request(path, { headers }, { peerAddress });

/** `app` as the sign-in helpers call it, every request from `peerAddress`. */
const from = (app: App, peerAddress: string) => ({
  request: async (path: string, init?: RequestInit) => await app.request(path, init, { peerAddress }),
});

/** The permits a `RateLimit` header says are left (`"global";r=<left>;t=<s>`). */
const left = (res: Response) => Number(/;r=(\d+);/.exec(res.headers.get("ratelimit") ?? "")?.[1]);

describe.each(["redis", "database"] as const)("rate limiting on %s", (store) => {
  let clock: ManualClock;
  let deps: Deps;
  let app: App;
  let second: App;
  let prefix: string;
  beforeAll(async () => {
    clock = new ManualClock("2026-11-22T10:00:00Z");
    prefix = uniquePrefix(`rl-${store}`);
    prefixes.push(prefix);
    const config = testConfig({ settings, cacheUrl: store === "redis" ? REDIS_URL : null });
    deps = await testDeps(config, { database: t.database, clock, cachePrefix: prefix });
    app = addProbeRoutes(createApp(deps), deps);
    const other = await testDeps(config, { database: t.database, clock, cachePrefix: prefix });
    second = addProbeRoutes(createApp(other), other);
  });
  afterAll(() => deps.cache?.close());

  /** A member of a tenant of their own, signed in on `app` from `address`. */
  const signedInPerson = async (address: string) => {
    const tenant = await createTenant(t.database.db);
    return await signIn(from(app, address), await createUser(t.database.db, tenant.id), tenant.code);
  };

  test("the global limit: headers count down, the 6th request is 429 with Retry-After", async () => {
    const ip = `198.51.100.${store === "redis" ? 1 : 2}`;
    for (let i = 0; i < 5; i++) {
      const res = await get(app, "/api/probe", ip);
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-policy")).toBe('"global";q=5;w=60');
      expect(res.headers.get("ratelimit")).toBe(`"global";r=${4 - i};t=${12 * (i + 1)}`);
    }
    const refused = await get(app, "/api/probe", ip);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("content-type")).toContain("application/problem+json");
    expect(refused.headers.get("retry-after")).toBe("12");
    expect(refused.headers.get("ratelimit")).toBe('"global";r=0;t=60');
    const body = (await refused.json()) as { code: string; status: number };
    expect(body.code).toBe("rate_limited");
    expect(body.status).toBe(429);

    // another client is unaffected; after Retry-After one more permit is back
    expect((await get(app, "/api/probe", "198.51.100.99")).status).toBe(200);
    clock.advance(12_000);
    expect((await get(app, "/api/probe", ip)).status).toBe(200);
    expect((await get(app, "/api/probe", ip)).status).toBe(429);
    clock.advance(60_000);
  });

  if (store === "redis")
    test("a client's bucket key expires when the bucket is full again, not later", async () => {
      const ip = "198.51.100.44";
      expect((await get(app, "/api/probe", ip)).status).toBe(200);
      const [key] = (await raw.keys(prefix)).filter((k) => k.includes(ip));
      if (!key) throw new Error("no bucket key");
      const ttl = await raw.client.pttl(key);
      // one permit spent of 5 per 60 s: full again in 12 s
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(12_000);
    });

  test("health probes are never limited", async () => {
    const ip = "198.51.100.50";
    for (let i = 0; i < 8; i++) {
      const res = await get(app, "/api/health", ip);
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit")).toBeNull();
    }
    expect((await get(app, "/api/health/ready", ip)).headers.get("ratelimit")).toBeNull();
  });

  test("endpoints that take a credential have the stricter limit on top of the global one", async () => {
    const ip = "198.51.100.60";
    const login = () =>
      app.request(
        "/api/auth/login",
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: "nobody@example.com", password: "wrong-password" }),
        },
        { peerAddress: ip },
      );
    const first = await login();
    expect(first.status).toBe(401);
    // the password windows are advertised policies too (their state only on their own 429)
    expect(first.headers.get("ratelimit-policy")).toBe(
      '"global";q=5;w=60, "auth";q=2;w=60, "password-address";q=5;w=900, "password-account";q=100;w=900, "password-ip";q=50;w=900',
    );
    expect(first.headers.get("ratelimit")).toBe('"global";r=4;t=12, "auth";r=1;t=30');
    expect((await login()).status).toBe(401);
    const refused = await login();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("30");
    expect(refused.headers.get("ratelimit-policy")).toBe('"global";q=5;w=60, "auth";q=2;w=60');
    // reading who you are is not an authentication attempt: the global budget alone
    const me = await get(app, "/api/auth/me", ip);
    expect(me.status).toBe(401);
    expect(me.headers.get("ratelimit-policy")).toBe('"global";q=5;w=60');
    clock.advance(60_000);
  });

  test("two app instances share one budget per client", async () => {
    const ip = "198.51.100.70";
    for (let i = 0; i < 5; i++) expect((await get(i % 2 ? app : second, "/api/probe", ip)).status).toBe(200);
    expect((await get(second, "/api/probe", ip)).status).toBe(429);
    expect((await get(app, "/api/probe", ip)).status).toBe(429);
    clock.advance(60_000);
  });

  test("a caller this process verified has one budget of their own, wherever they call from", async () => {
    const n = store === "redis" ? 1 : 2;
    const alice = await signedInPerson(`192.0.2.${20 + n}`);
    const bob = await signedInPerson(`192.0.2.${30 + n}`);
    const office = `198.51.100.${80 + n}`;
    // a token this process has not verified yet counts against its address (here: the office's)
    const first = await get(app, "/api/auth/me", office, alice.headers);
    expect(first.status).toBe(200);
    expect(left(first)).toBe(4);
    // verified now: Alice's own budget, from the office, from home, through another instance
    for (const [i, where] of [office, office, `203.0.113.${n}`, office, `203.0.113.${n}`].entries()) {
      const res = await get(app, "/api/auth/me", where, alice.headers);
      expect(res.status).toBe(200);
      expect(left(res)).toBe(4 - i);
    }
    expect((await get(app, "/api/auth/me", `203.0.113.${10 + n}`, alice.headers)).status).toBe(429);
    // the other instance verifies her token once (counted against that address), then it is her budget
    expect((await get(second, "/api/auth/me", `203.0.113.${20 + n}`, alice.headers)).status).toBe(200);
    expect((await get(second, "/api/auth/me", `203.0.113.${20 + n}`, alice.headers)).status).toBe(429);
    // Bob behind the same office address is not held back by Alice
    for (let i = 0; i < 6; i++)
      expect((await get(app, "/api/auth/me", office, bob.headers)).status).toBe(200);
    expect((await get(app, "/api/auth/me", office, bob.headers)).status).toBe(429);
    // the office address has counted the two first requests only: three more for anyone else there
    const anonymous = await get(app, "/api/probe", office);
    expect(left(anonymous)).toBe(2);
    // a made-up token counts against the address, whatever it claims
    expect((await get(app, "/api/probe", office, { authorization: "Bearer made.up.token" })).status).toBe(
      200,
    );
    expect(
      (await get(app, "/api/probe", office, { authorization: `Bearer ${alice.accessToken}x` })).status,
    ).toBe(200);
    expect((await get(app, "/api/probe", office)).status).toBe(429);
    clock.advance(60_000);
  });

  test("a token whose session ended counts against its address, not against its person", async () => {
    const n = store === "redis" ? 1 : 2;
    const carol = await signedInPerson(`192.0.2.${40 + n}`);
    const where = `198.51.100.${90 + n}`;
    for (let i = 0; i < 6; i++)
      expect((await get(app, "/api/auth/me", where, carol.headers)).status).toBe(200);
    expect((await get(app, "/api/auth/me", `198.51.100.${95 + n}`, carol.headers)).status).toBe(429);
    const logout = await app.request(
      "/api/auth/logout",
      {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ refreshToken: carol.refreshToken }),
      },
      { peerAddress: `192.0.2.${45 + n}` },
    );
    expect(logout.status).toBe(204);
    // the signature is still remembered, the session is not open: the address's budget, and 401
    const after = await get(app, "/api/auth/me", `198.51.100.${97 + n}`, carol.headers);
    expect(after.status).toBe(401);
    expect(left(after)).toBe(4);
    clock.advance(60_000);
  });

  test("forwarded addresses count only behind a trusted proxy", async () => {
    // behind the trusted proxy, each forwarded client has its own budget
    for (let i = 0; i < 5; i++)
      expect((await get(app, "/api/probe", "10.1.1.1", { "x-forwarded-for": "192.0.2.10" })).status).toBe(
        200,
      );
    expect((await get(app, "/api/probe", "10.1.1.1", { "x-forwarded-for": "192.0.2.10" })).status).toBe(429);
    expect((await get(app, "/api/probe", "10.1.1.1", { "x-forwarded-for": "192.0.2.11" })).status).toBe(200);
    // an untrusted peer cannot escape its budget by inventing X-Forwarded-For
    for (let i = 0; i < 5; i++)
      expect(
        (await get(app, "/api/probe", "203.0.113.5", { "x-forwarded-for": `192.0.2.${100 + i}` })).status,
      ).toBe(200);
    expect((await get(app, "/api/probe", "203.0.113.5", { "x-forwarded-for": "192.0.2.200" })).status).toBe(
      429,
    );
    clock.advance(60_000);
  });
});

describe("rate-limit settings", () => {
  test("outside Production, unset settings take the documented defaults", () => {
    const policies = rateLimitPolicies(testConfig().settings, "Development");
    expect([policies.global.limit, policies.global.windowSeconds]).toEqual([600, 60]);
    expect([policies.auth.limit, policies.auth.windowSeconds]).toEqual([30, 60]);
    expect(policies.auth.onUnavailable).toBe("closed");
  });

  test("Production has no defaults", () => {
    expect(() => rateLimitPolicies(testConfig().settings, "Production")).toThrow(
      "RateLimiting:Global:PermitLimit",
    );
  });
});
