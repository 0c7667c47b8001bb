import { expect, test } from "bun:test";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

const app = useTestApp({ settings: relaxedLimits });

async function refused(response: Response, field: string) {
  expect(response.status).toBe(400);
  expect(response.headers.get("content-type")).toContain("application/problem+json");
  const body = (await response.json()) as { code: string; errors: { path: string }[] };
  expect(body.code).toBe("validation_failed");
  expect(body.errors.map((e) => e.path)).toContain(field);
}

test("a NUL in a JSON string is a 400 naming the field, not a 500 from PostgreSQL", async () => {
  await refused(
    await app.request("/api/auth/login", json({ email: "a\u0000b@x.example", password: "x" })),
    "email",
  );
  const admin = await signedInPlatformAdmin(app);
  await refused(
    await app.request("/api/admin/schedules/nightly", {
      ...json(
        { cron: "* * * * *", kind: "system.noop", payload: { deep: ["ok", "a\u0000"] } },
        admin.headers,
      ),
      method: "PUT",
    }),
    "payload.deep.1",
  );
});

test("a lone surrogate in a JSON string or key is refused; a paired one is stored", async () => {
  const text = '{"email":"a\\ud800b@x.example","password":"x"}';
  await refused(
    await app.request("/api/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: text,
    }),
    "email",
  );
  // an escaped backslash before u0000 is no NUL: the body goes on to the route
  const fine = await app.request("/api/auth/login", json({ email: "\\u0000@x.example", password: "x" }));
  expect(fine.status).not.toBe(500);
  const paired = await app.request("/api/auth/login", json({ email: "😀@x.example", password: "x" }));
  expect(paired.status).not.toBe(500);
});

test("a NUL in a query parameter or a path segment is a 400 naming the parameter", async () => {
  const admin = await signedInPlatformAdmin(app);
  const tenant = await signedInTenant(app);
  await refused(await app.request("/api/admin/jobs?kind=a%00b", { headers: admin.headers }), "kind");
  await refused(
    await app.request("/api/tenant/audit-events?action=a%00b", { headers: tenant.owner.headers }),
    "action",
  );
  await refused(
    await app.request(`/api/admin/tenants/${tenant.id}/secrets/a%00b`, {
      method: "DELETE",
      headers: admin.headers,
    }),
    "name",
  );
  await refused(await app.request("/api/admin/tenants?cursor=a%00", { headers: admin.headers }), "cursor");
  await refused(await app.request("/api/admin/jobs?a%00=1", { headers: admin.headers }), "a\\u0000");
});

test("a form body is guarded too", async () => {
  const response = await app.request("/console/sign-in", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "email=a%00b&password=x",
  });
  await refused(response, "email");
});

test("percent-encoding that decodes to storable text goes on to the route", async () => {
  const admin = await signedInPlatformAdmin(app);
  const fine = await app.request("/api/admin/jobs?kind=a%20b%C3%A9", { headers: admin.headers });
  expect(fine.status).toBe(200);
  await refused(
    await app.request("/api/admin/jobs?kind=%F0%9F%98%80%00", { headers: admin.headers }),
    "kind",
  );
});
