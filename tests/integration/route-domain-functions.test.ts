import { describe, expect, spyOn, test } from "bun:test";
import { and, eq, isNull } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { createCustomDomain } from "../../src/custom-domains/create-custom-domain.ts";
import { deleteCustomDomain } from "../../src/custom-domains/delete-custom-domain.ts";
import { sessions, tenantDomains, users } from "../../src/db/schema/index.ts";
import { declaredRoutes } from "../../src/http/access.ts";
import { deleteTenantUser, disableTenantUser } from "../../src/identity/users.ts";
import { createTenantUpload, deleteTenantObject } from "../../src/storage/tenant-objects.ts";
import { suspendTenant } from "../../src/tenancy/tenants.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { recordUsage } from "../../src/usage/record-usage.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { uniqueHost } from "../helpers/domains.ts";
import { createTenant, createUser, loginTokens } from "../helpers/identity.ts";

/** The domain functions the tenant and admin routes call, each doing its work in one step. */
const app = useTestApp({ settings: relaxedLimits });
const t = app.testDatabase;

const domainUsage = (tenantId: string) =>
  getCurrentUsage(app.deps, systemCtx("test", tenantId), { feature: "custom_domains", period: "never" });
const domainCount = async (tenantId: string) =>
  (await t.database.db.select().from(tenantDomains).where(eq(tenantDomains.tenantId, tenantId))).length;

describe("custom domains and their custom_domains usage", () => {
  test("an operator's addition is not held to the plan and counts; its removal counts −1", async () => {
    const tenant = await createTenant(t.database.db); // the default plan has no custom domains
    const ctx = systemCtx("test", tenant.id);
    const domain = await createCustomDomain(app.deps, ctx, { hostname: uniqueHost(), forPlatform: true });
    expect(await domainUsage(tenant.id)).toBe(1);
    await deleteCustomDomain(app.deps, ctx, { id: domain.id });
    expect(await domainUsage(tenant.id)).toBe(0);
    expect(await domainCount(tenant.id)).toBe(0);
  });

  test("a tenant's own addition is held to its plan: nothing is added or counted", async () => {
    const tenant = await createTenant(t.database.db);
    await expect(
      createCustomDomain(app.deps, systemCtx("test", tenant.id), { hostname: uniqueHost() }),
    ).rejects.toMatchObject({ code: "payment_required" });
    expect(await domainCount(tenant.id)).toBe(0);
    expect(await domainUsage(tenant.id)).toBe(0);
  });

  test("a hostname the tenant already added is a conflict that counts nothing; another tenant may claim it", async () => {
    const [a, b] = [await createTenant(t.database.db), await createTenant(t.database.db)];
    const hostname = uniqueHost();
    await createCustomDomain(app.deps, systemCtx("test", a.id), { hostname, forPlatform: true });
    await createCustomDomain(app.deps, systemCtx("test", b.id), { hostname, forPlatform: true });
    await expect(
      createCustomDomain(app.deps, systemCtx("test", b.id), { hostname, forPlatform: true }),
    ).rejects.toMatchObject({ code: "conflict" });
    expect(await domainUsage(b.id)).toBe(1);
  });
});

test("recordUsage inside a caller's transaction is undone with it", async () => {
  const tenant = await createTenant(t.database.db);
  const ctx = systemCtx("test", tenant.id);
  const input = {
    feature: "custom_domains",
    quantity: 1,
    idempotencyKey: "tx-rollback",
  };
  await expect(
    t.database.db.transaction(async (tx) => {
      expect((await recordUsage(app.deps, { ...ctx, tx }, input)).recorded).toBe(true);
      throw new Error("roll back");
    }),
  ).rejects.toThrow("roll back");
  expect(await domainUsage(tenant.id)).toBe(0);
  // the key was not spent: the same event counts once when it commits
  expect((await recordUsage(app.deps, ctx, input)).recorded).toBe(true);
  expect(await domainUsage(tenant.id)).toBe(1);
});

test("without a configured bucket there is no object storage: 503, nothing counted", async () => {
  const tenant = await createTenant(t.database.db);
  const ctx = systemCtx("test", tenant.id);
  expect(app.deps.storage).toBeNull();
  await expect(
    createTenantUpload(app.deps, ctx, { key: "a.txt", contentType: "text/plain", size: 3 }),
  ).rejects.toMatchObject({ code: "unavailable" });
  await expect(deleteTenantObject(app.deps, ctx, { key: "a.txt" })).rejects.toMatchObject({
    code: "unavailable",
  });
  expect(
    await getCurrentUsage(app.deps, systemCtx("test", tenant.id), {
      feature: "storage_bytes",
      period: "never",
    }),
  ).toBe(0);
});

describe("users and tenants end their sessions with the change", () => {
  const openSessions = (userId: string) =>
    t.database.db
      .select({ id: sessions.id })
      .from(sessions)
      .where(and(eq(sessions.userId, userId), isNull(sessions.revokedAt)));

  test("disabling a user revokes their sessions and evicts them from the session cache", async () => {
    const tenant = await createTenant(t.database.db);
    await createUser(t.database.db, tenant.id, { role: "owner" });
    const user = await createUser(t.database.db, tenant.id);
    await loginTokens(app, { email: user.email, tenant: tenant.code });
    expect(await openSessions(user.id)).toHaveLength(1);
    const evict = spyOn(app.deps.sessionCache, "evict");
    try {
      await disableTenantUser(app.deps, systemCtx("test", tenant.id), { userId: user.id });
      expect(evict).toHaveBeenCalledWith({ userId: user.id });
    } finally {
      evict.mockRestore();
    }
    expect(await openSessions(user.id)).toHaveLength(0);
    const [row] = await t.database.db
      .select({ status: users.status })
      .from(users)
      .where(eq(users.id, user.id));
    expect(row?.status).toBe("Disabled");
  });

  test("removing a user takes their sessions with them", async () => {
    const tenant = await createTenant(t.database.db);
    await createUser(t.database.db, tenant.id, { role: "owner" });
    const user = await createUser(t.database.db, tenant.id);
    await loginTokens(app, { email: user.email, tenant: tenant.code });
    const evict = spyOn(app.deps.sessionCache, "evict");
    try {
      await deleteTenantUser(app.deps, systemCtx("test", tenant.id), { userId: user.id });
      expect(evict).toHaveBeenCalledWith({ userId: user.id });
    } finally {
      evict.mockRestore();
    }
    expect(await openSessions(user.id)).toHaveLength(0);
  });

  test("another tenant's user is not found, and nothing is evicted", async () => {
    const [a, b] = [await createTenant(t.database.db), await createTenant(t.database.db)];
    const user = await createUser(t.database.db, b.id);
    const evict = spyOn(app.deps.sessionCache, "evict");
    try {
      await expect(
        disableTenantUser(app.deps, systemCtx("test", a.id), { userId: user.id }),
      ).rejects.toMatchObject({ code: "not_found" });
      expect(evict).not.toHaveBeenCalled();
    } finally {
      evict.mockRestore();
    }
  });

  test("suspending a tenant clears the tenant lookup and ends its sessions", async () => {
    const tenant = await createTenant(t.database.db);
    const clear = spyOn(app.deps.tenants, "clear");
    const evict = spyOn(app.deps.sessionCache, "evict");
    try {
      const suspended = await suspendTenant(app.deps, systemCtx("test"), { tenantId: tenant.id });
      expect(suspended.status).toBe("Suspended");
      expect(clear).toHaveBeenCalled();
      expect(evict).toHaveBeenCalledWith({ tenantId: tenant.id });
    } finally {
      clear.mockRestore();
      evict.mockRestore();
    }
    await expect(
      suspendTenant(app.deps, systemCtx("test"), { tenantId: crypto.randomUUID() }),
    ).rejects.toMatchObject({ code: "not_found" });
  });
});

test("authentication is mounted once per area; each admin and tenant route carries the guard it declares", () => {
  const mounted = new Map<string, number>();
  for (const route of app.app.routes)
    if (route.method === "ALL" && /^\/api\/(admin|tenant)\b/.test(route.path))
      mounted.set(route.path, (mounted.get(route.path) ?? 0) + 1);
  // authenticate on each area (on tenant routes the per-API-key limiter after it); no guard by prefix
  // (and one that only advertises the webhook test-send limits in RateLimit-Policy: not a guard)
  expect(Object.fromEntries(mounted)).toEqual({
    "/api/admin/*": 1,
    "/api/tenant/*": 2,
    "/api/tenant/webhooks/:id/test": 1,
  });
  // who may call each route is its own guard, from its declared access (src/http/access.ts)
  const routes = declaredRoutes(app.app.routes);
  const admin = routes.filter((r) => r.path.startsWith("/api/admin/"));
  const tenant = routes.filter((r) => r.path.startsWith("/api/tenant/"));
  expect(admin.length).toBeGreaterThan(10);
  expect(tenant.length).toBeGreaterThan(5);
  expect(admin.filter((r) => r.access !== "platform")).toEqual([]);
  expect(tenant.filter((r) => typeof r.access !== "object")).toEqual([]);
});
