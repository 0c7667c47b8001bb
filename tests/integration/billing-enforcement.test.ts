import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import type { App } from "../../src/app.ts";
import { applySubscriptionEvent } from "../../src/billing/apply-subscription-event.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { tenantDomains } from "../../src/db/schema/index.ts";
import type { Deps } from "../../src/deps.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { s3Settings, startTestS3, type TestS3 } from "../fixtures/s3-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { uniqueHost } from "../helpers/domains.ts";
import { signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

/** Plan limits on the tenant routes that create things: custom domains and storage uploads. */

const clock = new ManualClock(Date.now());
let s3: TestS3;
let deps: Deps;
let app: App;
let admin: Record<string, string>;

beforeAll(async () => {
  s3 = await startTestS3(clock);
}, 30_000);
afterAll(() => s3.close(), 30_000);
const h = useTestApp({
  cache: "billing-enforce",
  clock,
  settings: () => ({ ...relaxedLimits, ...s3Settings(s3) }),
});
const t = h.testDatabase;

beforeAll(async () => {
  deps = h.deps;
  app = h.app;
  admin = (await signedInPlatformAdmin(h)).headers;
}, 30_000);

const db = () => t.database.db;

async function request(path: string, init: RequestInit = {}): Promise<Response> {
  return app.request(path, init, { peerAddress: "127.0.0.1" });
}

function post(headers: Record<string, string>, path: string, body: unknown) {
  return request(path, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** A tenant with an owner signed in, on `plan` (free: no subscription at all, the default plan). */
async function tenantOn(plan: "free" | "pro" | "suspended") {
  const tenant = await signedInTenant(h, { plan: plan === "free" ? undefined : "pro" });
  if (plan === "suspended")
    await applySubscriptionEvent(deps, systemCtx("test", tenant.id), { event: "suspend", source: "admin" });
  return { id: tenant.id, headers: tenant.owner.headers };
}

async function problemOf(response: Response) {
  return { status: response.status, code: ((await response.json()) as { code: string }).code };
}

async function domainCount(tenantId: string) {
  return (await db().select().from(tenantDomains).where(eq(tenantDomains.tenantId, tenantId))).length;
}

describe("custom domains (POST /api/tenant/domains)", () => {
  test("a free tenant is refused with 402 payment_required; nothing is created or counted", async () => {
    const free = await tenantOn("free");
    const refused = await post(free.headers, "/api/tenant/domains", { hostname: uniqueHost() });
    expect(await problemOf(refused)).toEqual({ status: 402, code: "payment_required" });
    expect(await domainCount(free.id)).toBe(0);
    expect(
      await getCurrentUsage(deps, systemCtx("test", free.id), { feature: "custom_domains", period: "never" }),
    ).toBe(0);
  });

  test("a pro tenant may add domains; each is counted, and a removal gives it back", async () => {
    const pro = await tenantOn("pro");
    const added = await post(pro.headers, "/api/tenant/domains", { hostname: uniqueHost() });
    expect(added.status).toBe(201);
    const { id } = (await added.json()) as { id: string };
    expect(
      await getCurrentUsage(deps, systemCtx("test", pro.id), { feature: "custom_domains", period: "never" }),
    ).toBe(1);
    expect(
      (await request(`/api/tenant/domains/${id}`, { method: "DELETE", headers: pro.headers })).status,
    ).toBe(204);
    expect(
      await getCurrentUsage(deps, systemCtx("test", pro.id), { feature: "custom_domains", period: "never" }),
    ).toBe(0);
  });

  test("the plan's limit reached: 403 usage_limit_reached (pro: 5 domains)", async () => {
    const pro = await tenantOn("pro");
    for (let i = 0; i < 5; i++)
      expect((await post(pro.headers, "/api/tenant/domains", { hostname: uniqueHost() })).status).toBe(201);
    const sixth = await post(pro.headers, "/api/tenant/domains", { hostname: uniqueHost() });
    expect(await problemOf(sixth)).toEqual({ status: 403, code: "usage_limit_reached" });
    expect(await domainCount(pro.id)).toBe(5);
  });

  test("additions sent at the same moment cannot pass the limit: exactly 5 of 8 are created", async () => {
    const pro = await tenantOn("pro");
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => post(pro.headers, "/api/tenant/domains", { hostname: uniqueHost() })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 201, 201, 403, 403, 403]);
    for (const refused of answers.filter((r) => r.status === 403))
      expect(((await refused.json()) as { code: string }).code).toBe("usage_limit_reached");
    expect(await domainCount(pro.id)).toBe(5);
    expect(
      await getCurrentUsage(deps, systemCtx("test", pro.id), { feature: "custom_domains", period: "never" }),
    ).toBe(5);
  });

  test("a suspended tenant is refused (402): custom domains are off while suspended", async () => {
    const suspended = await tenantOn("suspended");
    const refused = await post(suspended.headers, "/api/tenant/domains", { hostname: uniqueHost() });
    expect(await problemOf(refused)).toEqual({ status: 402, code: "payment_required" });
    expect(await domainCount(suspended.id)).toBe(0);
  });

  test("platform admins are not blocked by the tenant's plan; their additions still count", async () => {
    const free = await tenantOn("free");
    const added = await post(admin, `/api/admin/tenants/${free.id}/domains`, { hostname: uniqueHost() });
    expect(added.status).toBe(201);
    expect(
      await getCurrentUsage(deps, systemCtx("test", free.id), { feature: "custom_domains", period: "never" }),
    ).toBe(1);
  });
});

describe("storage uploads (POST /api/tenant/storage/uploads)", () => {
  const upload = (headers: Record<string, string>, key: string, size: number) =>
    post(headers, "/api/tenant/storage/uploads", { key, contentType: "text/plain", size });

  test("a free tenant (1 GiB) may upload; bytes are counted when granted, deletions subtract", async () => {
    const free = await tenantOn("free");
    const body = "hello, storage";
    const created = await upload(free.headers, "notes/a.txt", Buffer.byteLength(body));
    expect(created.status).toBe(201);
    const presigned = (await created.json()) as { url: string; headers: Record<string, string> };
    expect((await fetch(presigned.url, { method: "PUT", body, headers: presigned.headers })).status).toBe(
      200,
    );
    expect(
      await getCurrentUsage(deps, systemCtx("test", free.id), { feature: "storage_bytes", period: "never" }),
    ).toBe(Buffer.byteLength(body));
    const removed = await request("/api/tenant/storage/objects?key=notes/a.txt", {
      method: "DELETE",
      headers: free.headers,
    });
    expect(removed.status).toBe(204);
    // refunded once the URL has expired (storage-quota.test.ts): until then it could write again
    expect(
      await getCurrentUsage(deps, systemCtx("test", free.id), { feature: "storage_bytes", period: "never" }),
    ).toBe(Buffer.byteLength(body));
  });

  test("a suspended tenant (storage limit 0) gets no upload URL, not even for an empty object", async () => {
    const suspended = await tenantOn("suspended");
    for (const size of [10, 0])
      expect(await problemOf(await upload(suspended.headers, `s-${size}.txt`, size))).toEqual({
        status: 403,
        code: "usage_limit_reached",
      });
    expect(
      await getCurrentUsage(deps, systemCtx("test", suspended.id), {
        feature: "storage_bytes",
        period: "never",
      }),
    ).toBe(0);
    // a bad request is told what is wrong with it before the plan is consulted
    const wrongType = await post(suspended.headers, "/api/tenant/storage/uploads", {
      key: "x.exe",
      contentType: "application/x-msdownload",
      size: 10,
    });
    expect(wrongType.status).toBe(400);
    expect(((await wrongType.json()) as { errors: { path: string }[] }).errors.map((e) => e.path)).toEqual([
      "contentType",
    ]);
  });

  test("the limit reached: 403 usage_limit_reached, counting what was already granted", async () => {
    const pro = await tenantOn("pro");
    const override = await request(`/api/admin/tenants/${pro.id}/features/storage_bytes/override`, {
      method: "PUT",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify({ enabled: true, limit: 100 }),
    });
    expect(override.status).toBe(204);
    expect((await upload(pro.headers, "one.txt", 60)).status).toBe(201);
    expect(await problemOf(await upload(pro.headers, "two.txt", 60))).toEqual({
      status: 403,
      code: "usage_limit_reached",
    });
    expect((await upload(pro.headers, "three.txt", 40)).status).toBe(201);
    expect(
      await getCurrentUsage(deps, systemCtx("test", pro.id), { feature: "storage_bytes", period: "never" }),
    ).toBe(100);
  });
});
