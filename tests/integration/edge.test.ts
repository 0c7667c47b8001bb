import { afterAll, beforeAll, expect, test } from "bun:test";
import { SECURITY_HEADERS } from "../../src/http/middleware.ts";
import { createTestApp, type TestApp } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";

let t: TestDatabase;
let app: TestApp;
beforeAll(async () => {
  t = await createTestDatabase();
  app = await createTestApp({ database: t.database, env: { Security__Jwt__AccessTokenMinutes: "15" } });
});
afterAll(() => t.drop());

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
    expect.arrayContaining(["x-content-type-options", "strict-transport-security", "x-frame-options"]),
  );
});

test("a well-formed X-Request-Id is kept, a malformed one replaced; the log line has no query string", async () => {
  const kept = await app.request("/api/health?token=should-not-be-logged", {
    headers: { "x-request-id": "abc-123" },
  });
  expect(kept.headers.get("x-request-id")).toBe("abc-123");
  const replaced = await app.request("/api/health", { headers: { "x-request-id": "bad id with spaces" } });
  expect(replaced.headers.get("x-request-id")).not.toBe("bad id with spaces");
  const line = app.logs.map((l) => JSON.parse(l)).find((l) => l.requestId === "abc-123");
  expect(line).toMatchObject({ msg: "request", method: "GET", path: "/api/health", status: 200 });
  expect(app.logs.join("\n")).not.toContain("should-not-be-logged");
});
