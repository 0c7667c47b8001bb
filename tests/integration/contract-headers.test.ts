import { expect, test } from "bun:test";
import { createTestApp, relaxedLimits, testConfig, useTestApp } from "../helpers/app.ts";
import { json, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

const origin = "https://app.customer.test";
const app = useTestApp({
  settings: relaxedLimits,
  env: { BrowserAuth__AllowedOrigins__0: origin },
});

test("every 401 carries WWW-Authenticate: sign-in, refresh, password change, SMS verify, browser sign-in, payment webhook", async () => {
  const tenant = await signedInTenant(app);
  const refusals: [string, Response][] = [
    [
      "login",
      await app.request("/api/auth/login", json({ email: "nobody@x.example", password: "wrong-password-1" })),
    ],
    ["refresh", await app.request("/api/auth/refresh", json({ refreshToken: "not-a-token" }))],
    [
      "password",
      await app.request(
        "/api/auth/password",
        json(
          { currentPassword: "wrong-password-1", newPassword: "another-long-password-2" },
          tenant.owner.headers,
        ),
      ),
    ],
    [
      "sms verify",
      await app.request(
        "/api/auth/sms/verify",
        json({ phone: "+15550100", code: "123456", tenant: tenant.code }),
      ),
    ],
    [
      "browser login",
      await app.request(
        "/api/auth/browser/login",
        json({ email: "nobody@x.example", password: "wrong-password-1" }, { origin }),
      ),
    ],
    ["payment webhook", await app.request(`/api/webhooks/payments/${tenant.id}`, json({ type: "x" }))],
    ["no credentials", await app.request("/api/tenant/users")],
  ];
  for (const [name, response] of refusals) {
    expect(response.status, name).toBe(401);
    expect(response.headers.get("www-authenticate"), name).toStartWith("Bearer");
  }
});

test("a 201 that creates an addressable resource answers its Location", async () => {
  const admin = await signedInPlatformAdmin(app);
  const created = await app.request(
    "/api/admin/tenants",
    json({ code: `loc${crypto.randomUUID().slice(0, 6)}`, name: "Located" }, admin.headers),
  );
  expect(created.status).toBe(201);
  const tenant = (await created.json()) as { id: string };
  expect(created.headers.get("location")).toBe(`/api/admin/tenants/${tenant.id}`);
  expect((await app.request(created.headers.get("location") ?? "", { headers: admin.headers })).status).toBe(
    200,
  );

  const owner = (await signedInTenant(app)).owner;
  const user = await app.request(
    "/api/tenant/users",
    json(
      {
        email: `u${crypto.randomUUID().slice(0, 6)}@x.example`,
        name: "U",
        password: "a-long-test-password-1",
      },
      owner.headers,
    ),
  );
  expect(user.status).toBe(201);
  expect(user.headers.get("location")).toBe(
    `/api/tenant/users/${((await user.json()) as { id: string }).id}`,
  );

  const schedule = await app.request("/api/admin/schedules/located", {
    ...json({ cron: "0 3 * * *", kind: "system.noop" }, admin.headers),
    method: "PUT",
  });
  expect(schedule.status).toBe(201);
  expect(schedule.headers.get("location")).toBe("/api/admin/schedules/located");
});

test("the document's server is an absolute URL: the configured public base URL, else the origin asked", async () => {
  const asked = (await (await app.request("http://localhost/api/openapi.json")).json()) as {
    servers: { url: string; description: string }[];
    info: { license: { name: string; identifier: string } };
  };
  expect(asked.servers).toEqual([{ url: "http://localhost", description: expect.any(String) }]);
  expect(asked.info.license).toEqual({ name: "MIT", identifier: "MIT" });
  const configured = await createTestApp({
    database: app.deps.database,
    config: testConfig({ settings: { "Server:PublicBaseUrl": "https://api.example.com/" } }),
  });
  try {
    const doc = (await (await configured.request("/api/openapi.json")).json()) as {
      servers: { url: string }[];
    };
    expect(doc.servers.map((s) => s.url)).toEqual(["https://api.example.com"]);
  } finally {
    await configured.close();
  }
});

test("the JWKS declares what it sends: ETag and Cache-Control on the 200 and on the 304 of If-None-Match", async () => {
  const doc = (await (await app.request("/api/openapi.json")).json()) as {
    paths: Record<string, { get: { responses: Record<string, { headers?: Record<string, unknown> }> } }>;
  };
  const responses = doc.paths["/.well-known/jwks.json"]?.get.responses ?? {};
  for (const status of ["200", "304"])
    expect(Object.keys(responses[status]?.headers ?? {}), status).toEqual(
      expect.arrayContaining(["ETag", "Cache-Control"]),
    );
  // the harness checks both answers against those declarations (required, on their schema)
  const first = await app.request("/.well-known/jwks.json");
  expect(first.status).toBe(200);
  const etag = first.headers.get("etag") ?? "";
  expect(etag).toMatch(/^"[\w-]+"$/);
  expect(first.headers.get("cache-control")).toBe("public, max-age=60");
  const again = await app.request("/.well-known/jwks.json", { headers: { "if-none-match": etag } });
  expect(again.status).toBe(304);
  expect(again.headers.get("etag")).toBe(etag);
  expect(again.headers.get("cache-control")).toBe("public, max-age=60");
  expect(
    (await app.request("/.well-known/jwks.json", { headers: { "if-none-match": '"other"' } })).status,
  ).toBe(200);
});

test("/favicon.ico is an icon, linked from the console and the reference page", async () => {
  const icon = await app.request("/favicon.ico");
  expect(icon.status).toBe(200);
  expect(icon.headers.get("content-type")).toBe("image/svg+xml");
  expect(await icon.text()).toStartWith("<svg");
  expect(await (await app.request("/api/docs")).text()).toContain('rel="icon" href="/favicon.ico"');
});
