import { beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { carriesCredential } from "../../src/providers/setting-values.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant, signedInPlatformAdmin } from "../helpers/identity.ts";

const app = useTestApp({
  settings: {
    "Security:TenantSecrets:KeyId": "ts-test",
    "Security:TenantSecrets:MasterKey": randomBytes(32).toString("base64"),
  },
});
let admin: Record<string, string> = {};
beforeAll(async () => {
  admin = (await signedInPlatformAdmin(app)).headers;
});

const put = (tenantId: string, body: unknown | string) =>
  app.request(`/api/admin/tenants/${tenantId}/providers/sms`, {
    method: "PUT",
    headers: { ...admin, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

test("setting values that carry credentials are refused, naming the field, never echoing the value", async () => {
  const tenant = await createTenant(app.db);
  const pw = `pw${randomBytes(8).toString("hex")}`;
  const key = `k${randomBytes(8).toString("hex")}`;
  const response = await put(tenant.id, {
    provider: "x",
    settings: {
      from: "+15550100",
      endpoint: `https://user:${pw}@api.example/v1`,
      callbacks: [`https://hooks.example/cb?id=1&api_key=${key}`, "https://hooks.example/plain?page=2"],
      nested: { feed: `https://feed.example/x?Token=${key}`, signed: `https://cdn.example/a?sig=${key}` },
      form: `secret=${key}`,
      basic: `ftp://${key}@files.example/`,
    },
  });
  expect(response.status).toBe(400);
  const text = await response.text();
  const problem = JSON.parse(text) as { errors: { path: string; message: string }[] };
  expect(problem.errors.map((e) => e.path)).toEqual([
    "settings.basic",
    "settings.callbacks[0]",
    "settings.endpoint",
    "settings.form",
    "settings.nested.feed",
    "settings.nested.signed",
  ]);
  expect(problem.errors[0]?.message).toContain("tenant secret");
  for (const value of [pw, key]) expect(text).not.toContain(value);
  // plain URLs and query strings pass
  const ok = await put(tenant.id, {
    provider: "x",
    settings: { endpoint: "https://api.example/v1?region=eu&page=2", email: "ops@example.com" },
  });
  expect(ok.status).toBe(200);
});

test("what counts as a credential in a value", () => {
  for (const value of [
    "https://u:p@h.example",
    "https://u@h.example",
    "postgres://app:pw@db:5432/x",
    "https://h.example/?password=x",
    "https://h.example/?client_secret=x",
    "https://h.example/?access_token=x",
    "https://h.example/?X-Amz-Signature=x",
    "https://h.example/?key=x",
    "api_key=x&b=1",
  ])
    expect([value, carriesCredential(value)]).toEqual([value, true]);
  for (const value of [
    "https://h.example/path",
    "https://h.example/?region=eu&lang=fr",
    "+15550100",
    "user@example.com",
    "a=b",
    "https://h.example/@handle",
  ])
    expect([value, carriesCredential(value)]).toEqual([value, false]);
});

test("a settings object nested 150,000 levels deep is a 400, not a 500", async () => {
  const tenant = await createTenant(app.db);
  const depth = 150_000;
  const body = `{"provider":"x","settings":${'{"a":'.repeat(depth)}1${"}".repeat(depth)}}`;
  const response = await put(tenant.id, body);
  expect(response.status).toBe(400);
  expect(((await response.json()) as { detail: string }).detail).toContain("nested deeper than 64");
  expect(app.logs.some((line) => line.includes("unhandled error"))).toBe(false);
});
