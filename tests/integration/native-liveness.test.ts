import { afterAll, beforeAll, expect, test } from "bun:test";
import { bunServeOptions } from "../../src/http/bun-serve.ts";
import { HSTS_HEADER } from "../../src/http/middleware/request.ts";
import { createTestApp, useTestApp } from "../helpers/app.ts";

// Under Bun the liveness probe is answered by Bun's router in front of the app (nativeLiveness).
// These tests hold its answer and its log line equal to the app's own route for the same request.

let server: ReturnType<typeof Bun.serve>;
let base: string;
afterAll(() => server.stop(true));
// loopback is a trusted proxy here, so X-Forwarded-Proto from this test counts
const app = useTestApp({ env: { Tenancy__Resolution__TrustedProxies__0: "127.0.0.1" } });
const t = app.testDatabase;
beforeAll(() => {
  server = Bun.serve({ port: 0, ...bunServeOptions(app.app, app.deps) });
  base = `http://127.0.0.1:${server.port}`;
});

/** What a client can tell two answers apart by: status, body, headers but the date. */
async function answer(response: Response) {
  const headers = Object.fromEntries(
    [...response.headers].filter(([name]) => name !== "date" && name !== "content-length"),
  );
  return { status: response.status, headers, body: await response.text() };
}

/** The log line for a request id, without what differs between two requests (time, duration). */
function logLine(requestId: string) {
  const line = app.logs.map((l) => JSON.parse(l)).find((l) => l.requestId === requestId);
  if (!line) throw new Error(`no log line for ${requestId}`);
  const { time: _time, durationMs, ...rest } = line;
  expect(durationMs).toBeNumber();
  return rest;
}

test("the native probe answers as the app's route does, and logs the same line", async () => {
  const cases: [string, RequestInit][] = [
    ["/api/health", { headers: { "x-request-id": "probe-1" } }],
    ["/api/health?token=never-logged", { headers: { "x-request-id": "probe-2" } }],
    ["/api/health", { headers: { "x-request-id": "probe-3", "x-forwarded-proto": "https" } }],
    ["/api/health", { headers: { "x-request-id": "probe-4", "x-forwarded-proto": "https, http" } }],
    ["/api/health", { method: "HEAD", headers: { "x-request-id": "probe-5" } }],
  ];
  for (const [path, init] of cases) {
    const id = (init.headers as Record<string, string>)["x-request-id"] as string;
    const native = await answer(await fetch(`${base}${path}`, init));
    const nativeLine = logLine(id);
    app.logs.length = 0;
    const routed = await answer(await app.request(path, init, "127.0.0.1"));
    expect(native).toEqual(routed);
    expect(nativeLine).toEqual(logLine(id));
    // a passing probe's line is written at debug (this app's level), not info
    expect(nativeLine).toMatchObject({ level: "debug", msg: "request", status: 200 });
    app.logs.length = 0;
  }
  expect(app.logs.join("\n")).not.toContain("never-logged");
});

test("the native probe says HTTPS only when a trusted proxy does, and makes an id when none is good", async () => {
  const [name, value] = HSTS_HEADER;
  const https = await fetch(`${base}/api/health`, { headers: { "x-forwarded-proto": "https" } });
  expect(https.headers.get(name)).toBe(value);
  // the header set is shared between responses: the next plain one must not inherit anything
  const plain = await fetch(`${base}/api/health`, { headers: { "x-request-id": "bad id" } });
  expect(plain.headers.get(name)).toBeNull();
  const id = plain.headers.get("x-request-id");
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  expect(https.headers.get("x-request-id")).not.toBe(id);

  // a peer that is not a trusted proxy cannot claim HTTPS
  const untrusted = await createTestApp({
    database: t.database,
    env: { Tenancy__Resolution__TrustedProxies__0: "10.0.0.0/8" },
  });
  const other = Bun.serve({ port: 0, ...bunServeOptions(untrusted.app, untrusted.deps) });
  try {
    const spoofed = await fetch(`http://127.0.0.1:${other.port}/api/health`, {
      headers: { "x-forwarded-proto": "https" },
    });
    expect(spoofed.status).toBe(200);
    expect(spoofed.headers.get(name)).toBeNull();
  } finally {
    await other.stop(true);
    await untrusted.close();
  }
});

test("the native probe keeps an untrusted peer's X-Request-Id apart, as every route does", async () => {
  const untrusted = await createTestApp({
    database: t.database,
    env: { Tenancy__Resolution__TrustedProxies__0: "10.0.0.0/8" },
  });
  const other = Bun.serve({ port: 0, ...bunServeOptions(untrusted.app, untrusted.deps) });
  try {
    const probe = await fetch(`http://127.0.0.1:${other.port}/api/health`, {
      headers: { "x-request-id": "chosen-by-client" },
    });
    expect(probe.status).toBe(200);
    const id = probe.headers.get("x-request-id");
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const line = untrusted.logs.map((l) => JSON.parse(l)).find((l) => l.requestId === id);
    expect(line).toMatchObject({ path: "/api/health", clientRequestId: "chosen-by-client" });
    // the app's own route answers the same way
    const routed = await untrusted.request(
      "/api/health",
      { headers: { "x-request-id": "chosen-by-client" } },
      "127.0.0.1",
    );
    expect(routed.headers.get("x-request-id")).not.toBe("chosen-by-client");
  } finally {
    await other.stop(true);
    await untrusted.close();
  }
});

test("at the default level a passing probe writes no line, and the native one answers as the app's route", async () => {
  const quiet = await createTestApp({ database: t.database, env: { Logging__Level: "info" } });
  const other = Bun.serve({ port: 0, ...bunServeOptions(quiet.app, quiet.deps) });
  const requestLines = () => quiet.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === "request");
  try {
    const cases: RequestInit[] = [
      { headers: { "x-request-id": "chosen-by-client" } },
      { method: "HEAD" },
      // no proxy is trusted here: a claim of HTTPS does not count
      { headers: { "x-forwarded-proto": "https" } },
    ];
    for (const init of cases) {
      const native = await answer(await fetch(`http://127.0.0.1:${other.port}/api/health`, init));
      const routed = await answer(await quiet.request("/api/health", init, "127.0.0.1"));
      // each a new id of its own (a client's is never taken), everything else the same
      for (const { headers } of [native, routed]) {
        expect(headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
        delete headers["x-request-id"];
      }
      expect(native).toEqual(routed);
    }
    expect((await quiet.request("/api/health/ready")).status).toBe(200);
    expect(requestLines()).toEqual([]);
    // every other request is still logged at info
    expect((await fetch(`http://127.0.0.1:${other.port}/api/health/`)).status).toBe(404);
    expect(requestLines()).toMatchObject([{ level: "info", path: "/api/health/", status: 404 }]);
  } finally {
    await other.stop(true);
    await quiet.close();
  }
});

test("other methods and paths near the probe reach the app", async () => {
  const post = await fetch(`${base}/api/health`, { method: "POST" });
  expect(post.status).toBe(405);
  expect(post.headers.get("allow")).toBe("GET, HEAD");
  expect((await fetch(`${base}/api/health/`)).status).toBe(404);
  const ready = await fetch(`${base}/api/health/ready`);
  expect(ready.status).toBe(200);
  expect(((await ready.json()) as { checks: object }).checks).toHaveProperty("database:responseTime");
});

test("the probe is on Bun's router unless telemetry is on (then it is traced like every request)", async () => {
  expect(bunServeOptions(app.app, app.deps).routes?.["/api/health"]?.GET).toBeFunction();
  const traced = await createTestApp({
    database: t.database,
    env: { OpenTelemetry__OtlpEndpoint: "http://127.0.0.1:9" },
  });
  try {
    expect(traced.deps.telemetry.enabled).toBe(true);
    expect(bunServeOptions(traced.app, traced.deps).routes).toBeUndefined();
  } finally {
    await traced.close();
    await traced.deps.telemetry.shutdown();
  }
});

test("a second server on a port already served fails at start (no silent port sharing)", () => {
  expect(() => Bun.serve({ ...bunServeOptions(app.app, app.deps), port: server.port })).toThrow(
    /EADDRINUSE|in use/,
  );
});
