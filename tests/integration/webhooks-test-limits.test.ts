import { expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, newMasterKey, signedInTenant } from "../helpers/identity.ts";

// Issue #29: 30 concurrent test sends were 30 POSTs to any public URL; now they are bounded per
// endpoint and per tenant (RateLimiting:WebhookTest), 429 with the RateLimit fields over either.
const clock = new ManualClock(Date.now());
const h = useTestApp({
  clock,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "wh-limits",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    "Webhooks:AllowPrivateDestinations": "true",
    "RateLimiting:WebhookTest:EndpointPermitLimit": "5",
    "RateLimiting:WebhookTest:TenantPermitLimit": "8",
    "RateLimiting:WebhookTest:WindowSeconds": "60",
  },
});

async function endpoint(headers: Record<string, string>): Promise<string> {
  const response = await h.request(
    "/api/tenant/webhooks",
    json({ url: "http://127.0.0.1:9/hook", events: ["*"] }, headers),
  );
  expect(response.status).toBe(201);
  return ((await response.json()) as { endpoint: { id: string } }).endpoint.id;
}
const sendTest = (id: string, headers: Record<string, string>) =>
  h.request(`/api/tenant/webhooks/${id}/test`, { method: "POST", headers });
async function deliveries(id: string, headers: Record<string, string>): Promise<number> {
  const response = await h.request(`/api/tenant/webhooks/${id}/deliveries?limit=100`, { headers });
  return ((await response.json()) as { items: unknown[] }).items.length;
}

test("30 concurrent test sends to one endpoint: 5 queued, 25 refused with 429 and the RateLimit fields", async () => {
  const t = await signedInTenant(h);
  const id = await endpoint(t.owner.headers);
  const answers = await Promise.all(Array.from({ length: 30 }, () => sendTest(id, t.owner.headers)));
  const statuses = answers.map((r) => r.status);
  expect(statuses.filter((s) => s === 202)).toHaveLength(5);
  expect(statuses.filter((s) => s === 429)).toHaveLength(25);
  const refused = answers.find((r) => r.status === 429) as Response;
  expect(refused.headers.get("content-type")).toStartWith("application/problem+json");
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(refused.headers.get("ratelimit")).toMatch(/^"webhooktest";r=0;t=\d+$/);
  expect(refused.headers.get("ratelimit-policy")).toContain('"webhooktest";q=5;w=60');
  expect(refused.headers.get("ratelimit-policy")).toContain('"webhooktest-tenant";q=8;w=60');
  expect(((await refused.json()) as { code: string }).code).toBe("rate_limited");
  expect(await deliveries(id, t.owner.headers)).toBe(5);
  // a permit comes back every 12 s
  clock.advance(12_000);
  expect((await sendTest(id, t.owner.headers)).status).toBe(202);
  expect((await sendTest(id, t.owner.headers)).status).toBe(429);
});

test("the tenant's endpoints together are bounded too; another tenant is not", async () => {
  const t = await signedInTenant(h);
  const [a, b] = [await endpoint(t.owner.headers), await endpoint(t.owner.headers)];
  for (let i = 0; i < 5; i++) expect((await sendTest(a, t.admin.headers)).status).toBe(202);
  for (let i = 0; i < 3; i++) expect((await sendTest(b, t.owner.headers)).status).toBe(202);
  const refused = await sendTest(b, t.owner.headers);
  expect(refused.status).toBe(429);
  expect(refused.headers.get("ratelimit")).toMatch(/^"webhooktest-tenant";r=0;t=\d+$/);
  const other = await signedInTenant(h);
  expect((await sendTest(await endpoint(other.owner.headers), other.owner.headers)).status).toBe(202);
  // an unknown endpoint is 404, never counted
  expect((await sendTest(crypto.randomUUID(), other.owner.headers)).status).toBe(404);
});
