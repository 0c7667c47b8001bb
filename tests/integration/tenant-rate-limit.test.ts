import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { updateFeatureOverride } from "../../src/billing/update-feature-override.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { useTestApp } from "../helpers/app.ts";
import { json, signedInTenant } from "../helpers/identity.ts";

/**
 * The per-tenant request rate (issue #30 point 5): each tenant's requests to /api/tenant/* share one
 * bucket of its plan's `rate_limit_per_minute`, all its users and keys together, beside the
 * per-address and per-key limits; a tenant over it gets 429 naming the `tenant` policy while another
 * tenant on the same API process is not touched.
 */
const clock = new ManualClock(Date.now());
const app = useTestApp({
  clock,
  cache: "tenant-rate",
  // the per-address limits out of the way; the tenant's stays on (relaxedLimits would turn it off)
  settings: {
    "RateLimiting:Global:PermitLimit": "100000",
    "RateLimiting:Auth:PermitLimit": "100000",
    "RateLimiting:Tenant:PlanSeconds": "5",
  },
});

const users = (headers: Record<string, string>, peer?: string) =>
  app.request("/api/tenant/users", { headers }, peer);

/** The tenant's plan gives it `perMinute` requests a minute (an override, as an operator sets one). */
async function rateOf(tenantId: string, perMinute: number): Promise<void> {
  await updateFeatureOverride(app.deps, systemCtx("test", tenantId), {
    featureKey: "rate_limit_per_minute",
    enabled: true,
    limit: perMinute,
    reason: "test",
  });
}

test("the catalog's plans carry a request rate: free, pro and enterprise", async () => {
  for (const [plan, limit] of [
    [undefined, 600],
    ["pro", 6_000],
    ["enterprise", 60_000],
  ] as const) {
    const t = await signedInTenant(app, plan ? { plan } : {});
    const response = await app.request("/api/tenant/features", { headers: t.owner.headers });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { features: { key: string }[] };
    expect(body.features.find((f) => f.key === "rate_limit_per_minute")).toMatchObject({
      kind: "rate",
      limit,
      enabled: true,
    });
    expect(response.headers.get("ratelimit-policy")).toContain(`"tenant";q=${limit};w=60`);
  }
});

test("a noisy tenant hitting its plan's rate gets 429 naming the tenant policy; another tenant is unaffected", async () => {
  const noisy = await signedInTenant(app);
  const quiet = await signedInTenant(app);
  await rateOf(noisy.id, 5);
  await rateOf(quiet.id, 5);
  // the owner, an admin and an API key of the noisy tenant, from different addresses: one bucket
  const created = await app.request(
    "/api/tenant/api-keys",
    json({ name: "noisy", scopes: ["users:read"] }, noisy.owner.headers),
  );
  expect(created.status).toBe(201);
  const { key } = (await created.json()) as { key: string };
  clock.advance(60_000); // the key's creation above was one of the five
  const callers = [noisy.owner.headers, noisy.admin.headers, { authorization: `Bearer ${key}` }];
  for (let i = 0; i < 5; i++) {
    const response = await users(callers[i % 3] ?? {}, `198.51.100.${i + 1}`);
    expect(response.status).toBe(200);
    expect(response.headers.get("ratelimit-policy")).toContain('"tenant";q=5;w=60');
    expect(response.headers.get("ratelimit")).toContain(`"tenant";r=${4 - i};`);
  }
  for (const headers of callers) {
    const refused = await users(headers, "203.0.113.50");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("ratelimit")).toMatch(/"tenant";r=0;t=\d+/);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const problem = (await refused.json()) as { code: string; detail: string };
    expect(problem.code).toBe("rate_limited");
    expect(problem.detail).toContain('"tenant"');
  }
  // the other tenant, on the same process, the same plan, at the same moment: its own bucket
  for (let i = 0; i < 3; i++) {
    const response = await users(quiet.admin.headers);
    expect(response.status).toBe(200);
    expect(response.headers.get("ratelimit")).toContain(`"tenant";r=${4 - i};`);
  }
  // 5 a minute: one request back every 12 s
  clock.advance(12_000);
  expect((await users(noisy.admin.headers)).status).toBe(200);
  expect((await users(noisy.admin.headers)).status).toBe(429);
});

test("a plan change reaches the limiter within RateLimiting:Tenant:PlanSeconds", async () => {
  const t = await signedInTenant(app);
  await rateOf(t.id, 2);
  clock.advance(60_000);
  expect((await users(t.owner.headers)).headers.get("ratelimit-policy")).toContain('"tenant";q=2;w=60');
  await rateOf(t.id, 50);
  // held for PlanSeconds (5): still the old rate, then the new one
  expect((await users(t.owner.headers)).headers.get("ratelimit-policy")).toContain('"tenant";q=2;w=60');
  clock.advance(6_000);
  const response = await users(t.owner.headers);
  expect(response.status).toBe(200);
  expect(response.headers.get("ratelimit-policy")).toContain('"tenant";q=50;w=60');
});

const monthUsage = (tenantId: string) =>
  getCurrentUsage(app.deps, systemCtx("test", tenantId), { feature: "api_calls", period: "month" });

test("api_calls: each tenant request counts one, written to the usage ledger in a batch", async () => {
  const t = await signedInTenant(app);
  for (let i = 0; i < 3; i++) expect((await users(t.owner.headers)).status).toBe(200);
  expect((await app.request("/api/tenant/features", { headers: t.admin.headers })).status).toBe(200);
  await app.deps.apiCalls.flush();
  expect(await monthUsage(t.id)).toBe(4);
  // one ledger event for the four, not one per request
  const [events] = await execute<{ n: number; total: number }>(
    app.db, // the owner's connection: the test's own look at the ledger
    sql`select count(*)::int as n, sum(quantity)::int as total from usage_events
        where tenant_id = ${t.id} and feature_key = 'api_calls'`,
  );
  expect(events).toEqual({ n: 1, total: 4 });
  // nothing new: the next flush writes nothing
  await app.deps.apiCalls.flush();
  expect(await monthUsage(t.id)).toBe(4);
});

test("api_calls past the plan's monthly limit: 403 usage_limit_reached, the features page open; another tenant unaffected", async () => {
  const capped = await signedInTenant(app);
  const other = await signedInTenant(app);
  await updateFeatureOverride(app.deps, systemCtx("test", capped.id), {
    featureKey: "api_calls",
    enabled: true,
    limit: 4,
    reason: "test",
  });
  for (let i = 0; i < 4; i++) expect((await users(capped.owner.headers)).status).toBe(200);
  await app.deps.apiCalls.flush();
  const refused = await users(capped.owner.headers);
  expect(refused.status).toBe(403);
  expect(((await refused.json()) as { code: string }).code).toBe("usage_limit_reached");
  expect((await app.request("/api/tenant/features", { headers: capped.owner.headers })).status).toBe(200);
  expect((await users(other.owner.headers)).status).toBe(200);
  // a larger limit lifts it once the process reads the plan again
  await updateFeatureOverride(app.deps, systemCtx("test", capped.id), {
    featureKey: "api_calls",
    enabled: true,
    limit: 100,
    reason: "test",
  });
  clock.advance(6_000);
  expect((await users(capped.owner.headers)).status).toBe(200);
});
