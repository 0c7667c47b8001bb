import { beforeAll, expect, test } from "bun:test";
import type { Server } from "bun";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { bunServeOptions } from "../../src/http/bun-serve.ts";
import { FAST_LANE_ME_PATH } from "../../src/http/fast-lane.ts";
import { type CounterStore, memoryCounterStore } from "../../src/security/counter-store.ts";
import { createTestApp, type TestApp, testConfig, useTestApp } from "../helpers/app.ts";
import { type SignedInTenant, signedInTenant, signIn } from "../helpers/identity.ts";
import { rsaKeys } from "../helpers/production-env.ts";

// `GET /api/auth/me` is finished at the edge when all it needs is remembered (src/http/fast-lane.ts)
// and declined to the app otherwise. These tests hold the two paths to one answer: the same request
// through Bun's route for /me (fast lane, else the app) and through the app alone gets the same
// status, body and headers (all but the request id and the date), and the same log line.

// a fixed clock: two clients with the same history get the same rate-limit state, to the second
const clock = new ManualClock();
const LIMIT = 200;
const h = useTestApp({
  clock,
  // loopback is a trusted proxy, so X-Forwarded-For names the client (and its bucket)
  env: { Tenancy__Resolution__TrustedProxies__0: "127.0.0.1" },
  settings: {
    "RateLimiting:Global:PermitLimit": String(LIMIT),
    "RateLimiting:Global:WindowSeconds": "60",
    "RateLimiting:Auth:PermitLimit": "1000",
  },
});

/** What Bun hands a route: the peer (loopback, the trusted proxy) and the scheme. */
const server = {
  protocol: "http",
  requestIP: () => ({ address: "127.0.0.1", family: "IPv4", port: 40000 }),
} as unknown as Server<undefined>;

let tenant: SignedInTenant;
beforeAll(async () => {
  tenant = await signedInTenant(h);
});

/** What a client can tell two answers apart by: status, body, headers but the date and the request id. */
async function answer(response: Response) {
  const headers = [...response.headers]
    .filter(([name]) => name !== "date" && name !== "content-length" && name !== "x-request-id")
    .sort(([a], [b]) => a.localeCompare(b));
  // a problem's body names the request id too
  const id = response.headers.get("x-request-id");
  const body = await response.text();
  return { status: response.status, headers, body: id ? body.replaceAll(id, "<request id>") : body };
}

/** The request from `client` (its address in X-Forwarded-For, written by the trusted proxy). */
function requestFrom(client: string, init: { url?: string; headers?: Record<string, string> } = {}) {
  return new Request(init.url ?? `http://localhost${FAST_LANE_ME_PATH}`, {
    headers: { "x-forwarded-for": client, ...init.headers },
  });
}

/** Through Bun's route for /me, as `bunServeOptions` serves it: the fast lane, else the app. */
function viaEdge(app: TestApp["app"], deps: TestApp["deps"], req: Request) {
  const route = bunServeOptions(app, deps).routes?.[FAST_LANE_ME_PATH];
  if (!route) throw new Error("no route for /me on Bun's router");
  return route.GET(req, server);
}

/** The log line for a request id, without what differs between two requests. */
function logLine(logs: string[], requestId: string) {
  const line = logs.map((l) => JSON.parse(l)).find((l) => l.requestId === requestId);
  if (!line) throw new Error(`no log line for ${requestId}`);
  const { time: _time, durationMs, requestId: _id, ...rest } = line;
  expect(durationMs).toBeNumber();
  return rest;
}

/**
 * Two instances of the app over the test database, each with counters of its own (in memory,
 * `switchable` with one outage switch) and nothing remembered yet: requests made to both in
 * lockstep meet the same history in each, whatever bucket the global limit picks (a caller's own,
 * `byCaller`, is shared by all their addresses). The first's requests go through Bun's route (the
 * fast lane, else its app), the second's through its app alone.
 */
async function twinApps(env: Record<string, string> = {}) {
  const outage = { down: false };
  const switchable = (): CounterStore => {
    const real = memoryCounterStore();
    return {
      kind: real.kind,
      window: (...args) => real.window(...args),
      resetWindows: (...args) => real.resetWindows(...args),
      refundWindows: (...args) => real.refundWindows(...args),
      rate: (...args) => (outage.down ? Promise.reject(new Error("store unreachable")) : real.rate(...args)),
    };
  };
  const config = testConfig({
    env: { Tenancy__Resolution__TrustedProxies__0: "127.0.0.1", ...env },
    settings: {
      // one signing key, made now: a token signed in on one instance is valid on the other
      "Security:Jwt:CurrentKeyId": "twins",
      "Security:Jwt:PrivateKey": rsaKeys().privateKeyPem,
      "RateLimiting:Global:PermitLimit": String(LIMIT),
      "RateLimiting:Global:WindowSeconds": "60",
      "RateLimiting:Auth:PermitLimit": "1000",
    },
  });
  const open = () =>
    createTestApp({ database: h.testDatabase.database, config, clock, counters: switchable() });
  const [edge, app] = [await open(), await open()];
  return { edge, app, outage, close: () => Promise.all([edge.close(), app.close()]) };
}

test("success, 401, a wrong host and 429: the fast lane and the app answer alike, to the last permit", async () => {
  // client A goes through Bun's route (fast lane, else the app), client B through the app alone, in
  // lockstep, each to its own instance, so both buckets always have the same history
  const twins = await twinApps();
  try {
    const owner = await signIn(twins.edge, tenant.owner, tenant.code);
    const member = await signIn(twins.edge, tenant.member, tenant.code);
    const cases: { name: string; headers?: Record<string, string>; url?: string }[] = [
      { name: "success", headers: owner.headers },
      { name: "success over HTTPS", headers: { ...owner.headers, "x-forwarded-proto": "https" } },
      { name: "success with an id", headers: { ...owner.headers, "x-request-id": "chosen-id" } },
      { name: "another member", headers: member.headers },
      { name: "no credentials" },
      { name: "an unknown token", headers: { authorization: "Bearer not.a-token.at-all" } },
      { name: "a malformed header", headers: { authorization: "Bearer  two  parts" } },
      { name: "an API key on /me", headers: { authorization: "Bearer plk_nothing_here" } },
      // the lane reads the usual form without a whitespace scan: a known token around any whitespace
      // is not the token it verified, so the app decides (a 200 for the forms bearerToken reads)
      ...[
        ["the scheme in lower case", (t: string) => `bearer ${t}`],
        ["two spaces before the token", (t: string) => `Bearer  ${t}`],
        ["a tab before the token", (t: string) => `Bearer\t${t}`],
        ["a space inside the token", (t: string) => `Bearer ${t.slice(0, 40)} ${t.slice(40)}`],
        ["a tab inside the token", (t: string) => `Bearer ${t.slice(0, 40)}\t${t.slice(40)}`],
        ["more after the token", (t: string) => `Bearer ${t} ${t}`],
      ].map(([name, form]) => ({
        name: name as string,
        headers: { authorization: (form as (t: string) => string)(owner.accessToken) },
      })),
      { name: "a wrong host", headers: owner.headers, url: `http://evil.example${FAST_LANE_ME_PATH}` },
      { name: "a tenant code", headers: { ...owner.headers, "x-tenant": tenant.code } },
      {
        name: "a query",
        headers: owner.headers,
        url: `http://localhost${FAST_LANE_ME_PATH}?tenant=${tenant.code}`,
      },
    ];
    const fastLane = twins.edge.app.fastLane;
    if (!fastLane) throw new Error("the test app has no fast lane");
    const seen = new Map<string, Set<number>>();
    let servedFast = 0;
    let refused = false;
    for (let round = 0; !refused; round++) {
      expect(round).toBeLessThan(LIMIT);
      for (const c of cases) {
        const edgeRequest = requestFrom("203.0.113.1", c);
        // whether the fast lane finishes this one (asked on a copy: a declined request counts nothing)
        const edge = await answer(await viaEdge(twins.edge.app, twins.edge.deps, edgeRequest));
        const routed = await answer(
          await twins.app.request(c.url ?? FAST_LANE_ME_PATH, requestFrom("203.0.113.2", c)),
        );
        expect({ case: c.name, ...edge }).toEqual({ case: c.name, ...routed });
        if (!seen.has(c.name)) seen.set(c.name, new Set());
        seen.get(c.name)?.add(edge.status);
        if (edge.status === 429 && c.name === "success") refused = true;
      }
      // a success the fast lane itself answers (when the lease has a permit), beside the app's
      const direct = await fastLane(requestFrom("203.0.113.1", { headers: owner.headers }), server);
      if (direct) {
        servedFast++;
        const routed = await twins.app.request(
          FAST_LANE_ME_PATH,
          requestFrom("203.0.113.2", { headers: owner.headers }),
        );
        expect(await answer(direct)).toEqual(await answer(routed));
      } else {
        // declined, so nothing was counted for A: both go through the app, to stay in lockstep
        await twins.edge.request(FAST_LANE_ME_PATH, requestFrom("203.0.113.1", { headers: owner.headers }));
        await twins.app.request(FAST_LANE_ME_PATH, requestFrom("203.0.113.2", { headers: owner.headers }));
      }
    }
    // the lane answered most successes far from the budget, and the app every refusal
    expect(servedFast).toBeGreaterThan(5);
    expect(seen.get("success")).toEqual(new Set([200, 429]));
    expect(seen.get("no credentials")?.has(401)).toBe(true);
    expect(seen.get("an unknown token")?.has(401)).toBe(true);
    expect(seen.get("a wrong host")?.has(400)).toBe(true);
  } finally {
    await twins.close();
  }
});

test("the fast lane's log line is the app's", async () => {
  const headers = { ...tenant.admin.headers };
  // the caches of the admin's token, session and memberships, and a lease for the client
  for (let i = 0; i < 4; i++) await h.request(FAST_LANE_ME_PATH, requestFrom("198.51.100.7", { headers }));
  const fastLane = h.app.fastLane;
  const direct = await fastLane?.(
    requestFrom("198.51.100.7", { headers: { ...headers, "x-request-id": "edge-1" } }),
    server,
  );
  expect(direct?.status).toBe(200);
  await h.request(
    FAST_LANE_ME_PATH,
    requestFrom("198.51.100.7", { headers: { ...headers, "x-request-id": "app-1" } }),
  );
  expect(logLine(h.logs, "edge-1")).toEqual(logLine(h.logs, "app-1"));
});

test("a session that ended is declined by the fast lane and refused by the app", async () => {
  const user = await signIn(h, tenant.member, tenant.code);
  for (let i = 0; i < 4; i++)
    await h.request(FAST_LANE_ME_PATH, requestFrom("198.51.100.8", { headers: user.headers }));
  expect(
    (await h.app.fastLane?.(requestFrom("198.51.100.8", { headers: user.headers }), server))?.status,
  ).toBe(200);
  const logout = await h.request("/api/auth/logout", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ refreshToken: user.refreshToken }),
  });
  expect(logout.status).toBe(204);
  expect(h.app.fastLane?.(requestFrom("198.51.100.8", { headers: user.headers }), server)).toBeUndefined();
  const edge = await viaEdge(h.app, h.deps, requestFrom("198.51.100.8", { headers: user.headers }));
  expect(edge.status).toBe(401);
});

test("with CORS configured the app answers /me (preflight and actual alike), through Bun's fetch", async () => {
  // Bun's fetch on one instance, the app of the other: the same history in each (`twinApps`)
  const twins = await twinApps({ Cors__Origins__0: "https://app.example" });
  const cors = twins.edge;
  try {
    expect(cors.app.fastLane).toBeUndefined();
    const options = bunServeOptions(cors.app, cors.deps);
    expect(options.routes?.[FAST_LANE_ME_PATH]).toBeUndefined();
    const user = await signIn(twins.edge, tenant.owner, tenant.code);
    const requests: [string, RequestInit][] = [
      [
        "preflight",
        {
          method: "OPTIONS",
          headers: {
            origin: "https://app.example",
            "access-control-request-method": "GET",
            "access-control-request-headers": "authorization",
          },
        },
      ],
      ["actual", { headers: { ...user.headers, origin: "https://app.example" } }],
      ["another origin", { headers: { ...user.headers, origin: "https://evil.example" } }],
    ];
    for (const [name, init] of requests) {
      const viaBun = await answer(
        await options.fetch(
          new Request(`http://localhost${FAST_LANE_ME_PATH}`, {
            ...init,
            headers: { ...(init.headers as Record<string, string>), "x-forwarded-for": "192.0.2.1" },
          }),
          server,
        ),
      );
      const viaApp = await answer(
        await twins.app.request(FAST_LANE_ME_PATH, {
          ...init,
          headers: { ...(init.headers as Record<string, string>), "x-forwarded-for": "192.0.2.2" },
        }),
      );
      expect({ name, ...viaBun }).toEqual({ name, ...viaApp });
    }
  } finally {
    await twins.close();
  }
});

test("with telemetry on there is no fast lane (the request gets the app's span and metric)", async () => {
  const traced = await createTestApp({
    database: h.testDatabase.database,
    env: { OpenTelemetry__OtlpEndpoint: "http://127.0.0.1:9" },
  });
  try {
    expect(traced.deps.telemetry.enabled).toBe(true);
    expect(traced.app.fastLane).toBeUndefined();
    expect(bunServeOptions(traced.app, traced.deps).routes).toBeUndefined();
  } finally {
    await traced.close();
    await traced.deps.telemetry.shutdown();
  }
});

test("served by Bun: /me from the fast lane over HTTP, other methods and paths to the app", async () => {
  const served = Bun.serve({ port: 0, ...bunServeOptions(h.app, h.deps) });
  try {
    const base = `http://127.0.0.1:${served.port}`;
    const headers = { ...tenant.owner.headers, "x-forwarded-for": "198.51.100.9" };
    for (let i = 0; i < 6; i++) {
      const me = await fetch(`${base}${FAST_LANE_ME_PATH}`, { headers });
      expect(me.status).toBe(200);
      expect(((await me.json()) as { user: { id: string } }).user.id).toBe(tenant.owner.id);
    }
    const head = await fetch(`${base}${FAST_LANE_ME_PATH}`, { method: "HEAD", headers });
    expect(head.status).toBe(200);
    const post = await fetch(`${base}${FAST_LANE_ME_PATH}`, { method: "POST", headers });
    expect(post.status).toBe(405);
    expect((await fetch(`${base}${FAST_LANE_ME_PATH}/`, { headers })).status).toBe(404);
  } finally {
    await served.stop(true);
  }
});

test("the store's decision when no lease has a permit, and its outage, answered as the app does", async () => {
  const twins = await twinApps();
  try {
    // signed in on one, valid on both (one configuration, one database)
    const user = await signIn(twins.edge, tenant.owner, tenant.code);
    const fastLane = twins.edge.app.fastLane;
    if (!fastLane) throw new Error("no fast lane");
    // each instance verifies the token and remembers its session (this request counts against its address)
    for (const twin of [twins.edge, twins.app])
      await twin.request(FAST_LANE_ME_PATH, requestFrom("192.0.2.50", { headers: user.headers }));
    // the caller's first request against their own budget has no lease: the lane waits on the store itself
    const first = fastLane(requestFrom("192.0.2.51", { headers: user.headers }), server);
    expect(first).toBeInstanceOf(Promise);
    const decided = await first;
    if (!decided) throw new Error("the lane declined a request the store admitted");
    expect(await answer(decided)).toEqual(
      await answer(
        await twins.app.request(FAST_LANE_ME_PATH, requestFrom("192.0.2.52", { headers: user.headers })),
      ),
    );
    // the store unreachable: the global limit lets requests through without RateLimit headers
    twins.outage.down = true;
    const open = await fastLane(requestFrom("192.0.2.53", { headers: user.headers }), server);
    if (!open) throw new Error("the lane declined a request the open limit lets through");
    const routed = await twins.app.request(
      FAST_LANE_ME_PATH,
      requestFrom("192.0.2.54", { headers: user.headers }),
    );
    expect(routed.status).toBe(200);
    expect(routed.headers.get("ratelimit")).toBeNull();
    expect(await answer(open)).toEqual(await answer(routed));
  } finally {
    await twins.close();
  }
});

test("the lane's answer follows a change of the caller, heard as the app hears it", async () => {
  const user = await signIn(h, tenant.admin, tenant.code);
  const headers = user.headers;
  for (let i = 0; i < 3; i++) await h.request(FAST_LANE_ME_PATH, requestFrom("198.51.100.20", { headers }));
  const nameOf = async (answer: Response | undefined) => {
    if (!answer) throw new Error("the lane declined");
    return ((await answer.json()) as { user: { name: string } }).user.name;
  };
  const before = await h.app.fastLane?.(requestFrom("198.51.100.20", { headers }), server);
  expect(await nameOf(before)).not.toBe("Renamed Admin");
  await h.db.execute(sql`update users set name = 'Renamed Admin' where id = ${tenant.admin.id}`);
  // what a change announces in every process (plinth_sessions), heard here
  h.deps.sessionCache.evict({ userId: tenant.admin.id });
  // the lane has nothing remembered now: the app reads afresh, and the lane answers from that
  expect(h.app.fastLane?.(requestFrom("198.51.100.20", { headers }), server)).toBeUndefined();
  const routed = await h.request(FAST_LANE_ME_PATH, requestFrom("198.51.100.20", { headers }));
  expect(((await routed.json()) as { user: { name: string } }).user.name).toBe("Renamed Admin");
  const after = await h.app.fastLane?.(requestFrom("198.51.100.20", { headers }), server);
  expect(await nameOf(after)).toBe("Renamed Admin");
});
