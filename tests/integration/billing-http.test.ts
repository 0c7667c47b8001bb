import { beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { type App, createApp } from "../../src/app.ts";
import { assertFeature } from "../../src/billing/entitlements.ts";
import { runSubscriptionBatch } from "../../src/billing/run-subscription-batch.ts";
import { DAY_MS } from "../../src/billing/subscription-states.ts";
import { SIGNATURE_HEADER, signatureHeader } from "../../src/billing/webhook-signature.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { planFeatures, subscriptionHistory } from "../../src/db/schema/index.ts";
import type { Deps } from "../../src/deps.ts";
import { putTenantProvider } from "../../src/providers/tenant-providers.ts";
import { writeTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { parseTenantSecretKeys } from "../../src/security/tenant-secrets.ts";
import { seedCatalog } from "../../src/seed.ts";
import { recordUsage } from "../../src/usage/record-usage.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createTenant, readyPlatformUser, signedInTenant, signInHeaders } from "../helpers/identity.ts";

const clock = new ManualClock("2026-11-10T12:00:00Z");
const logLines: string[] = [];
let deps: Deps;
let app: App;
let admin: Record<string, string>;
let adminEmail: string;

const secrets = new Map<string, string>();

const h = useTestApp({
  cache: "billing-http",
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "ts-test",
    "Security:TenantSecrets:MasterKey": randomBytes(32).toString("base64"),
    "Cache:OutputCacheEnabled": "true",
    "SaasSubscriptions:WebhookToleranceSeconds": "300",
  },
});
const t = h.testDatabase;

beforeAll(async () => {
  deps = h.deps;
  // capture lines before redaction to check that no secret is ever logged
  const logger = deps.logger;
  deps.logger = {
    ...logger,
    warn: (message, fields) => {
      logLines.push(JSON.stringify({ message, fields }));
      logger.warn(message, fields);
    },
    info: (message, fields) => {
      logLines.push(JSON.stringify({ message, fields }));
      logger.info(message, fields);
    },
  };
  // built after the logger is wrapped: the app's middleware keeps the logger it is given
  app = createApp(deps);
  // a tenant route metered by api_calls, as a business endpoint would be
  app.get("/api/tenant/probe-metered", async (c) => {
    const tenantId = c.get("principal")?.tenantId ?? "";
    await assertFeature(deps, systemCtx("test", tenantId), { feature: "api_calls" });
    await recordUsage(deps, systemCtx("test", tenantId), {
      feature: "api_calls",
      quantity: 1,
      idempotencyKey: c.get("requestId"),
    });
    return c.json({ ok: true });
  });
  adminEmail = (await readyPlatformUser(t.database.db)).email;
}, 30_000);

// tests move the clock by days: sign in again so tokens are fresh
beforeEach(async () => {
  admin = await signIn({ email: adminEmail });
});

const db = () => t.database.db;

async function request(path: string, init: RequestInit = {}): Promise<Response> {
  return app.request(path, init, { peerAddress: "127.0.0.1" });
}

/** Real sign-in through the app: the routes sit behind the real authentication. */
const signIn = (body: { email: string; tenant?: string }) => signInHeaders(request, body);

/** The tenant's payment provider with a webhook-signing secret (stored encrypted as a tenant secret). */
async function withPaymentProvider(tenantId: string): Promise<string> {
  const { keyring } = parseTenantSecretKeys(deps.config.settings.Security.TenantSecrets);
  if (!keyring) throw new Error("no keyring");
  const secret = `whsec_${randomBytes(16).toString("hex")}`;
  secrets.set(tenantId, secret);
  await writeTenantSecret(db(), keyring, tenantId, {
    name: "payment-webhook",
    value: secret,
    now: clock.now(),
  });
  await putTenantProvider(deps, systemCtx("test", tenantId), {
    type: "payment",
    provider: "stripe",
    status: "Active",
    settings: {},
    secretRefs: { webhookSecret: "payment-webhook" },
  });
  return secret;
}

function adminJson(method: string, body: unknown): RequestInit {
  return { method, headers: { ...admin, "content-type": "application/json" }, body: JSON.stringify(body) };
}

async function deliver(
  tenantId: string,
  body: unknown,
  options: { secret?: string; at?: number; header?: string | null } = {},
) {
  const rawBody = JSON.stringify(body);
  const timestamp = options.at ?? Math.floor(clock.now().getTime() / 1000);
  const headers: Record<string, string> = { "content-type": "application/json" };
  const header =
    options.header === undefined
      ? signatureHeader(options.secret ?? secrets.get(tenantId) ?? "", timestamp, rawBody)
      : options.header;
  if (header !== null) headers[SIGNATURE_HEADER] = header;
  return request(`/api/webhooks/payments/${tenantId}`, { method: "POST", headers, body: rawBody });
}

describe("payment webhook", () => {
  test("a validly signed event moves the subscription once; a second delivery is a duplicate", async () => {
    const tenant = await createTenant(db());
    await withPaymentProvider(tenant.id);
    const event = { id: "evt_1", type: "activate", plan: "pro", subscriptionRef: "sub_123" };
    const first = await deliver(tenant.id, event);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ applied: true, duplicate: false, status: "active" });
    const again = await deliver(tenant.id, event);
    expect(await again.json()).toEqual({ applied: false, duplicate: true, status: "active" });

    const failed = await deliver(tenant.id, { id: "evt_2", type: "payment_failed" });
    expect((await failed.json()) as object).toMatchObject({ applied: true, status: "past_due" });
    const history = await db()
      .select()
      .from(subscriptionHistory)
      .where(eq(subscriptionHistory.tenantId, tenant.id));
    expect(history.map((h) => [h.source, h.event, h.externalEventId])).toEqual([
      ["webhook", "activate", "evt_1"],
      ["webhook", "payment_failed", "evt_2"],
    ]);
    // an event the state does not accept: 409 problem
    const invalid = await deliver(tenant.id, { id: "evt_3", type: "activate" });
    expect(invalid.status).toBe(409);
    expect(invalid.headers.get("content-type")).toContain("application/problem+json");
  });

  test("a period end in the past without a periodStart: 400 validation_failed on periodEnd, nothing stored", async () => {
    const tenant = await createTenant(db());
    await withPaymentProvider(tenant.id);
    const refused = await deliver(tenant.id, {
      id: "evt_past",
      type: "activate",
      plan: "pro",
      periodEnd: new Date(clock.now().getTime() - DAY_MS).toISOString(),
    });
    expect(refused.status).toBe(400);
    expect(refused.headers.get("content-type")).toContain("application/problem+json");
    const body = (await refused.json()) as { code: string; errors?: { path: string }[] };
    expect(body.code).toBe("validation_failed");
    expect(body.errors?.map((e) => e.path)).toEqual(["periodEnd"]);
    const history = await db()
      .select()
      .from(subscriptionHistory)
      .where(eq(subscriptionHistory.tenantId, tenant.id));
    expect(history).toHaveLength(0);
  });

  test("wrong secret, tampered body, missing or malformed header: 401, nothing changes", async () => {
    const tenant = await createTenant(db());
    const secret = await withPaymentProvider(tenant.id);
    const other = await createTenant(db());
    const otherSecret = await withPaymentProvider(other.id);
    const body = { id: "evt_x", type: "activate", plan: "pro" };
    const now = Math.floor(clock.now().getTime() / 1000);
    const tampered = signatureHeader(secret, now, JSON.stringify({ ...body, plan: "enterprise" }));
    for (const response of [
      await deliver(tenant.id, body, { secret: "not-the-secret" }),
      await deliver(tenant.id, body, { secret: otherSecret }), // another tenant's secret
      await deliver(tenant.id, body, { header: tampered }),
      await deliver(tenant.id, body, { header: null }),
      await deliver(tenant.id, body, { header: "t=abc,v1=zz" }),
      await deliver("00000000-0000-4000-8000-000000000000", body, { secret }),
      await deliver("not-a-uuid", body, { secret }),
    ]) {
      expect(response.status).toBe(401);
      expect(((await response.json()) as { code: string }).code).toBe("unauthorized");
    }
    const history = await db()
      .select()
      .from(subscriptionHistory)
      .where(eq(subscriptionHistory.tenantId, tenant.id));
    expect(history).toHaveLength(0);
    expect(logLines.join("\n")).not.toContain(secret);
  });

  test("a replayed delivery outside the timestamp tolerance is refused", async () => {
    const tenant = await createTenant(db());
    await withPaymentProvider(tenant.id);
    const at = Math.floor(clock.now().getTime() / 1000);
    const body = { id: "evt_r", type: "activate", plan: "pro" };
    const header = signatureHeader(secrets.get(tenant.id) ?? "", at, JSON.stringify(body));
    clock.advance(301_000);
    const replay = await deliver(tenant.id, body, { header });
    expect(replay.status).toBe(401);
    const future = await deliver(tenant.id, body, { at: at + 301 + 301 });
    expect(future.status).toBe(401);
    const fresh = await deliver(tenant.id, body);
    expect(fresh.status).toBe(200);
  });

  test("a disabled payment provider receives nothing", async () => {
    const tenant = await createTenant(db());
    await withPaymentProvider(tenant.id);
    await putTenantProvider(deps, systemCtx("test", tenant.id), {
      type: "payment",
      provider: "stripe",
      status: "Disabled",
      settings: {},
      secretRefs: { webhookSecret: "payment-webhook" },
    });
    expect((await deliver(tenant.id, { id: "evt_d", type: "activate" })).status).toBe(401);
  });
});

describe("admin endpoints", () => {
  test("platform admins only: 401 anonymous, 403 for a tenant user (even for the user's own tenant)", async () => {
    const tenant = await signedInTenant({ deps, request });
    const { headers } = tenant.owner;
    for (const path of ["subscription", "subscription/history", "features", "usage"]) {
      expect((await request(`/api/admin/tenants/${tenant.id}/${path}`)).status).toBe(401);
      expect((await request(`/api/admin/tenants/${tenant.id}/${path}`, { headers })).status).toBe(403);
      expect((await request(`/api/admin/tenants/${tenant.id}/${path}`, { headers: admin })).status).toBe(200);
    }
    const change = await request(`/api/admin/tenants/${tenant.id}/subscription/events`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ event: "activate", plan: "enterprise" }),
    });
    expect(change.status).toBe(403);
  });

  test("one tenant's subscription, history, features and usage never show another's", async () => {
    const a = await createTenant(db());
    const b = await createTenant(db());
    expect(
      (
        await request(
          `/api/admin/tenants/${a.id}/subscription/events`,
          adminJson("POST", { event: "activate", plan: "enterprise" }),
        )
      ).status,
    ).toBe(200);
    await request(
      `/api/admin/tenants/${b.id}/subscription/events`,
      adminJson("POST", { event: "start_trial", plan: "pro" }),
    );
    await recordUsage(deps, systemCtx("test", a.id), {
      feature: "api_calls",
      quantity: 42,
      idempotencyKey: "a-1",
    });
    await request(
      `/api/admin/tenants/${b.id}/features/sso/override`,
      adminJson("PUT", { enabled: true, reason: "deal" }),
    );

    const subA = (await (
      await request(`/api/admin/tenants/${a.id}/subscription`, { headers: admin })
    ).json()) as {
      subscription: { tenantId: string; plan: string; status: string };
    };
    expect(subA.subscription).toMatchObject({ tenantId: a.id, plan: "enterprise", status: "active" });
    const subB = (await (
      await request(`/api/admin/tenants/${b.id}/subscription`, { headers: admin })
    ).json()) as {
      subscription: { plan: string; status: string };
    };
    expect(subB.subscription).toMatchObject({ plan: "pro", status: "trialing" });

    const historyA = (await (
      await request(`/api/admin/tenants/${a.id}/subscription/history`, { headers: admin })
    ).json()) as {
      items: { event: string; actorId: string | null }[];
    };
    expect(historyA.items.map((h) => h.event)).toEqual(["activate"]);
    expect(historyA.items[0]?.actorId).toBeString();
    for (const cursor of ["12", "not-a-cursor", "eyJpZCI6MH0"]) {
      const refused = await request(`/api/admin/tenants/${a.id}/subscription/history?cursor=${cursor}`, {
        headers: admin,
      });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { errors: { path: string }[] }).errors[0]?.path).toBe("cursor");
    }

    const usage = async (id: string) =>
      (
        (await (await request(`/api/admin/tenants/${id}/usage`, { headers: admin })).json()) as {
          items: { feature: string; used: number; limit: number | null }[];
        }
      ).items.find((u) => u.feature === "api_calls");
    expect(await usage(a.id)).toMatchObject({ used: 42, limit: null });
    expect(await usage(b.id)).toMatchObject({ used: 0, limit: 1_000_000 });

    const features = async (id: string) =>
      (
        (await (await request(`/api/admin/tenants/${id}/features`, { headers: admin })).json()) as {
          features: { key: string; enabled: boolean; source: string }[];
        }
      ).features.find((f) => f.key === "sso");
    expect(await features(b.id)).toMatchObject({ enabled: true, source: "override" });
    expect(await features(a.id)).toMatchObject({ enabled: true, source: "plan" });
    const c = await createTenant(db());
    expect(await features(c.id)).toMatchObject({ enabled: false, source: "plan" });

    for (const id of ["00000000-0000-4000-8000-000000000000", "nope"])
      expect((await request(`/api/admin/tenants/${id}/subscription`, { headers: admin })).status).toBe(404);
    const conflict = await request(
      `/api/admin/tenants/${b.id}/subscription/events`,
      adminJson("POST", { event: "reactivate" }),
    );
    expect(conflict.status).toBe(409);
  });

  test("tenant users see their own features only", async () => {
    const tenant = await signedInTenant({ deps, request });
    const { headers } = tenant.owner;
    await request(
      `/api/admin/tenants/${tenant.id}/subscription/events`,
      adminJson("POST", { event: "activate", plan: "pro" }),
    );
    const response = await request("/api/tenant/features", { headers });
    expect(response.status).toBe(200);
    expect((await response.json()) as object).toMatchObject({
      tenantId: tenant.id,
      plan: "pro",
      status: "active",
    });
  });
});

describe("entitlements on requests", () => {
  test("suspension by the loop turns a metered feature off on the very next request (402)", async () => {
    const tenant = await signedInTenant({ deps, request });
    const user = tenant.owner;
    let headers = await signIn({ email: user.email, tenant: tenant.code });
    const now = clock.now().getTime();
    await request(
      `/api/admin/tenants/${tenant.id}/subscription/events`,
      adminJson("POST", {
        event: "activate",
        plan: "pro",
        periodStart: new Date(now - 20 * DAY_MS).toISOString(),
        periodEnd: new Date(now + 1000).toISOString(),
      }),
    );
    expect((await request("/api/tenant/probe-metered", { headers })).status).toBe(200); // features now cached
    clock.advance(1000);
    await runSubscriptionBatch(deps, systemCtx("test"), { batchSize: 100 }); // → past_due: still allowed during grace
    expect((await request("/api/tenant/probe-metered", { headers })).status).toBe(200);
    clock.advance(7 * DAY_MS);
    await runSubscriptionBatch(deps, systemCtx("test"), { batchSize: 100 }); // → suspended
    headers = await signIn({ email: user.email, tenant: tenant.code });
    admin = await signIn({ email: adminEmail });
    const blocked = await request("/api/tenant/probe-metered", { headers });
    expect(blocked.status).toBe(402);
    expect(((await blocked.json()) as { code: string }).code).toBe("payment_required");
    // paying again lifts it at once
    await request(
      `/api/admin/tenants/${tenant.id}/subscription/events`,
      adminJson("POST", { event: "payment_succeeded" }),
    );
    expect((await request("/api/tenant/probe-metered", { headers })).status).toBe(200);
  });

  test("a metered limit reached answers 403 usage_limit_reached; a feature outside the plan 402", async () => {
    const tenant = await signedInTenant({ deps, request });
    const { headers } = tenant.owner;
    await request(
      `/api/admin/tenants/${tenant.id}/features/api_calls/override`,
      adminJson("PUT", { enabled: true, limit: 3 }),
    );
    for (let i = 0; i < 3; i++)
      expect((await request("/api/tenant/probe-metered", { headers })).status).toBe(200);
    const limited = await request("/api/tenant/probe-metered", { headers });
    expect(limited.status).toBe(403);
    expect(((await limited.json()) as { code: string }).code).toBe("usage_limit_reached");
    await request(
      `/api/admin/tenants/${tenant.id}/features/api_calls/override`,
      adminJson("PUT", { enabled: false }),
    );
    expect((await request("/api/tenant/probe-metered", { headers })).status).toBe(402);
    expect(
      (
        await request(`/api/admin/tenants/${tenant.id}/features/api_calls/override`, {
          method: "DELETE",
          headers: admin,
        })
      ).status,
    ).toBe(204);
    expect((await request("/api/tenant/probe-metered", { headers })).status).toBe(200);
  });
});

describe("catalog", () => {
  test("GET /api/plans lists the public plans with features, through the output cache", async () => {
    const first = await request("/api/plans");
    expect(first.status).toBe(200);
    const body = (await first.json()) as {
      items: { code: string; features: { key: string; limit: number | null }[] }[];
    };
    expect(body.items.map((p) => p.code)).toEqual(["free", "pro", "enterprise"]);
    expect(body.items[0]?.features.find((f) => f.key === "api_calls")?.limit).toBe(10_000);
    expect(first.headers.get("x-cache")).toBe("miss");
    const second = await request("/api/plans");
    expect(second.headers.get("x-cache")).toBe("hit");
  });

  test("seeding is idempotent and restores a changed built-in limit", async () => {
    const before = await db().select().from(planFeatures);
    await db().update(planFeatures).set({ limit: 1 }).where(eq(planFeatures.planCode, "free"));
    await seedCatalog({ database: { db: db() } }, systemCtx("test"));
    await seedCatalog({ database: { db: db() } }, systemCtx("test"));
    const after = await db().select().from(planFeatures);
    const view = (rows: typeof before) =>
      rows.map((r) => `${r.planCode}:${r.featureKey}:${r.enabled}:${r.limit}`).sort();
    expect(view(after)).toEqual(view(before));
  });
});

test("the OpenAPI document describes the billing routes", async () => {
  const response = await request("/api/openapi.json");
  expect(response.status).toBe(200);
  const doc = (await response.json()) as { paths: Record<string, unknown> };
  expect(Object.keys(doc.paths)).toEqual(
    expect.arrayContaining([
      "/api/plans",
      "/api/webhooks/payments/{tenantId}",
      "/api/tenant/features",
      "/api/admin/tenants/{tenantId}/subscription",
      "/api/admin/tenants/{tenantId}/subscription/events",
      "/api/admin/tenants/{tenantId}/subscription/history",
      "/api/admin/tenants/{tenantId}/features",
      "/api/admin/tenants/{tenantId}/features/{featureKey}/override",
      "/api/admin/tenants/{tenantId}/usage",
    ]),
  );
});
