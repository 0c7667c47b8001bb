import { expect, test } from "bun:test";
import { HSTS_HEADER, SECURITY_HEADERS } from "../../src/http/middleware/request.ts";
import { createTestApp, useTestApp } from "../helpers/app.ts";

const app = useTestApp({
  env: { Security__Jwt__AccessTokenMinutes: "15", Tenancy__Resolution__TrustedProxies__0: "10.0.0.0/8" },
});
const t = app.testDatabase;

test("every response carries the API security headers and its request id, errors included", async () => {
  for (const [path, status] of [
    ["/api/health", 200],
    ["/no/such/route", 404],
    ["/api/auth/me", 401],
  ] as const) {
    const response = await app.request(path);
    expect(response.status).toBe(status);
    for (const [name, value] of SECURITY_HEADERS) expect(response.headers.get(name)).toBe(value);
    expect(response.headers.get("x-request-id")).toBeString();
  }
  expect(SECURITY_HEADERS.map(([name]) => name)).toEqual(
    expect.arrayContaining(["content-security-policy", "x-content-type-options", "x-frame-options"]),
  );
});

test("Strict-Transport-Security only on responses that travel over HTTPS (RFC 6797 7.2)", async () => {
  const [name, value] = HSTS_HEADER;
  expect((await app.request("/api/health")).headers.get(name)).toBeNull();
  expect((await app.request("https://localhost/api/health")).headers.get(name)).toBe(value);
  // a TLS-terminating proxy says so with X-Forwarded-Proto; believed only from a trusted peer
  const proxied = { headers: { "x-forwarded-proto": "https" } };
  expect((await app.request("/api/health", proxied, "10.1.2.3")).headers.get(name)).toBe(value);
  expect((await app.request("/api/health", proxied, "203.0.113.9")).headers.get(name)).toBeNull();
  const plain = { headers: { "x-forwarded-proto": "http" } };
  expect((await app.request("/api/health", plain, "10.1.2.3")).headers.get(name)).toBeNull();
  // an appending proxy: the last entry is the proxy's own
  const appended = { headers: { "x-forwarded-proto": "https, http" } };
  expect((await app.request("/api/health", appended, "10.1.2.3")).headers.get(name)).toBeNull();
});

test("the probes answer on any Host and are never stored by a cache", async () => {
  for (const path of ["/api/health", "/api/health/ready"]) {
    const response = await app.request(path, { headers: { host: "10.244.3.17:8080" } });
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.get("content-type")).toBe("application/health+json");
  }
  // every other path still checks the Host
  expect((await app.request("/api/plans", { headers: { host: "evil.example" } })).status).toBe(400);
});

test("a trusted proxy's well-formed X-Request-Id is kept, a client's kept apart, a malformed one replaced; the log line has no query string", async () => {
  const kept = await app.request(
    "/api/health?token=should-not-be-logged",
    { headers: { "x-request-id": "abc-123" } },
    "10.0.0.7",
  );
  expect(kept.headers.get("x-request-id")).toBe("abc-123");
  // issue #29: an untrusted peer does not choose the request id (its own is logged beside it)
  const client = await app.request(
    "/api/health",
    { headers: { "x-request-id": "client-456" } },
    "203.0.113.9",
  );
  const clientId = client.headers.get("x-request-id");
  expect(clientId).not.toBe("client-456");
  expect(clientId).toMatch(/^[0-9a-f-]{36}$/);
  const replaced = await app.request("/api/health", { headers: { "x-request-id": "bad id with spaces" } });
  expect(replaced.headers.get("x-request-id")).not.toBe("bad id with spaces");
  const lines = app.logs.map((l) => JSON.parse(l));
  const line = lines.find((l) => l.requestId === "abc-123");
  expect(line).toMatchObject({ msg: "request", method: "GET", path: "/api/health", status: 200 });
  expect(line.clientRequestId).toBeUndefined();
  expect(lines.find((l) => l.requestId === clientId)).toMatchObject({ clientRequestId: "client-456" });
  expect(app.logs.join("\n")).not.toContain("should-not-be-logged");
});

test("CORS without Cors:Headers allows a fixed list, never whatever the preflight asks for", async () => {
  const corsApp = await createTestApp({
    database: t.database,
    env: {
      Cors__Origins__0: "https://app.example.test",
      Cors__Methods__0: "GET",
      Cors__AllowCredentials: "true",
    },
  });
  const preflight = await corsApp.request("/api/plans", {
    method: "OPTIONS",
    headers: {
      origin: "https://app.example.test",
      "access-control-request-method": "GET",
      "access-control-request-headers": "x-evil, authorization",
    },
  });
  const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").toLowerCase();
  expect(allowed).toContain("authorization");
  expect(allowed).not.toContain("x-evil");
});

test("a path that exists under other methods is 405 with Allow; an unknown path is 404", async () => {
  const patch = await app.request("/api/health", { method: "PATCH" });
  expect(patch.status).toBe(405);
  expect(patch.headers.get("allow")).toBe("GET, HEAD");
  expect(patch.headers.get("content-type")).toContain("application/problem+json");
  expect(((await patch.json()) as { code: string }).code).toBe("method_not_allowed");
  const refresh = await app.request("/api/auth/refresh", { method: "GET" });
  expect(refresh.status).toBe(405);
  expect(refresh.headers.get("allow")).toBe("POST");
  expect((await app.request("/no/such/route", { method: "PATCH" })).status).toBe(404);
});
