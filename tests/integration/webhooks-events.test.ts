import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { applySubscriptionEvent } from "../../src/billing/apply-subscription-event.ts";
import { systemCtx } from "../../src/context.ts";
import { createDomainTicker } from "../../src/custom-domains/checks.ts";
import { createCustomDomain } from "../../src/custom-domains/create-custom-domain.ts";
import { execute } from "../../src/db/client.ts";
import { tenantDomains } from "../../src/db/schema/index.ts";
import { deleteTenantUser, disableTenantUser } from "../../src/identity/users.ts";
import { createJobRegistry } from "../../src/jobs/registry.ts";
import { type Background, startBackground } from "../../src/loops/background.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { recordUsage } from "../../src/usage/record-usage.ts";
import { createWebhookEndpoint } from "../../src/webhooks/create-webhook-endpoint.ts";
import { webhookJobs } from "../../src/webhooks/delivery-prune.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fixtures/webhook-receiver.ts";
import { useTestApp } from "../helpers/app.ts";
import { domainSettings, publishRecords, uniqueHost } from "../helpers/domains.ts";
import { createTenant, createUser, newMasterKey } from "../helpers/identity.ts";

let doh: DohServer;
let gateway: GatewayServer;
let receiver: WebhookReceiver;
let background: Background | undefined;
beforeAll(() => {
  doh = startDohServer();
  gateway = startGatewayServer();
  receiver = startWebhookReceiver();
});
afterAll(async () => {
  await background?.stop(5_000);
  receiver.stop();
  await doh.stop();
  await gateway.stop();
});

const h = useTestApp({
  cache: "webhooks-events",
  settings: () =>
    domainSettings(doh, gateway, {
      "Security:TenantSecrets:KeyId": "wh-events",
      "Security:TenantSecrets:MasterKey": newMasterKey(),
      "Webhooks:AllowPrivateDestinations": "true",
      "BackgroundProcessing:JobPollSeconds": "1",
    }),
});
beforeAll(async () => {
  background = await startBackground(h.deps, { registry: createJobRegistry().add(h.deps, webhookJobs) });
});

interface Delivered {
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/** A tenant with one endpoint on `*` at its own path; `events()` are what it verified so far. */
async function subscribedTenant() {
  const tenant = await createTenant(h.db);
  const path = `/t-${tenant.code}`;
  const { endpoint, secret } = await createWebhookEndpoint(h.deps, systemCtx("test", tenant.id), {
    url: `${receiver.url}${path}`,
    events: ["*"],
  });
  const hook = new Webhook(secret);
  const verified = (count: number) =>
    receiver.waitFor(path, count).then((requests) =>
      requests.map(
        (r) =>
          hook.verify(r.body, {
            "webhook-id": r.headers["webhook-id"] ?? "",
            "webhook-timestamp": r.headers["webhook-timestamp"] ?? "",
            "webhook-signature": r.headers["webhook-signature"] ?? "",
          }) as Delivered,
      ),
    );
  return { tenantId: tenant.id, endpointId: endpoint.id, path, verified };
}

const eventsOf = async (tenantId: string) =>
  execute<{ type: string }>(
    h.db,
    sql`select type from webhook_events where tenant_id = ${tenantId} order by occurred_at, type`,
  );

test("user.disabled and user.deleted come with the change", async () => {
  const t = await subscribedTenant();
  await createUser(h.db, t.tenantId, { role: "owner" });
  const user = await createUser(h.db, t.tenantId, { role: "member" });
  const ctx = systemCtx("test", t.tenantId);
  await disableTenantUser(h.deps, ctx, { userId: user.id });
  await deleteTenantUser(h.deps, ctx, { userId: user.id });
  const got = await t.verified(4);
  expect(got.map((e) => e.type).sort()).toEqual([
    "user.created",
    "user.created",
    "user.deleted",
    "user.disabled",
  ]);
  expect(got.find((e) => e.type === "user.disabled")?.data).toEqual({ userId: user.id });
  expect(got.find((e) => e.type === "user.deleted")?.data).toEqual({ userId: user.id });
  expect(receiver.at(t.path)).toHaveLength(4);
});

describe("custom domains", () => {
  test("domain.activated when a claim verifies; domain.failed once as it turns Failed, not at every re-check", async () => {
    const t = await subscribedTenant();
    const ctx = systemCtx("test", t.tenantId);
    const good = await createCustomDomain(h.deps, ctx, { hostname: uniqueHost("ok"), forPlatform: true });
    const bad = await createCustomDomain(h.deps, ctx, { hostname: uniqueHost("bad"), forPlatform: true });
    await h.db.update(tenantDomains).set({ nextCheckAt: new Date("2100-01-01T00:00:00Z") });
    await h.db
      .update(tenantDomains)
      .set({ nextCheckAt: new Date(0) })
      .where(eq(tenantDomains.tenantId, t.tenantId));
    publishRecords(doh, good);
    const ticker = createDomainTicker(h.deps);
    expect(await ticker.tick()).toBe(2);
    const got = await t.verified(2);
    const activated = got.find((e) => e.type === "domain.activated");
    expect(activated?.data).toEqual({ domainId: good.id, hostname: good.hostname });
    const failed = got.find((e) => e.type === "domain.failed");
    expect(failed?.data.domainId).toBe(bad.id);
    expect(failed?.data.code).toBe("dns_nxdomain");
    // checked again while Failed: no second event
    await h.db
      .update(tenantDomains)
      .set({ nextCheckAt: new Date(0) })
      .where(eq(tenantDomains.id, bad.id));
    expect(await ticker.tick()).toBe(1);
    expect((await eventsOf(t.tenantId)).filter((e) => e.type === "domain.failed")).toHaveLength(1);
  });

  test("a name moving to a tenant that proved ownership: domain.failed (ownership_moved) to the one that lost it", async () => {
    const first = await subscribedTenant();
    const second = await subscribedTenant();
    const hostname = uniqueHost("moved");
    const a = await createCustomDomain(h.deps, systemCtx("test", first.tenantId), {
      hostname,
      forPlatform: true,
    });
    const b = await createCustomDomain(h.deps, systemCtx("test", second.tenantId), {
      hostname,
      forPlatform: true,
    });
    await h.db.update(tenantDomains).set({ nextCheckAt: new Date("2100-01-01T00:00:00Z") });
    await h.db
      .update(tenantDomains)
      .set({ nextCheckAt: new Date(0) })
      .where(eq(tenantDomains.id, a.id));
    publishRecords(doh, a);
    expect(await createDomainTicker(h.deps).tick()).toBe(1);
    await h.db
      .update(tenantDomains)
      .set({ nextCheckAt: new Date(0) })
      .where(eq(tenantDomains.id, b.id));
    publishRecords(doh, b);
    expect(await createDomainTicker(h.deps).tick()).toBe(1);
    const lost = (await first.verified(2)).map((e) => [e.type, e.data.domainId, e.data.code]).sort();
    expect(lost).toEqual([
      ["domain.activated", a.id, undefined],
      ["domain.failed", a.id, "ownership_moved"],
    ]);
    const won = await second.verified(1);
    expect(won.map((e) => [e.type, e.data.domainId])).toEqual([["domain.activated", b.id]]);
  });
});

test("subscription.changed at every state move, past due and suspension included", async () => {
  const t = await subscribedTenant();
  const ctx = systemCtx("test", t.tenantId);
  await applySubscriptionEvent(h.deps, ctx, { event: "start_trial", source: "admin", plan: "pro" });
  await applySubscriptionEvent(h.deps, ctx, { event: "activate", source: "admin", plan: "pro" });
  await applySubscriptionEvent(h.deps, ctx, { event: "payment_failed", source: "admin" });
  await applySubscriptionEvent(h.deps, ctx, { event: "suspend", source: "admin" });
  // four slots deliver in parallel: arrivals may come in any order, the moves are compared as a set
  const order = ["trialing", "active", "past_due", "suspended"];
  const got = (await t.verified(4))
    .filter((e) => e.type === "subscription.changed")
    .sort((x, y) => order.indexOf(String(x.data.toStatus)) - order.indexOf(String(y.data.toStatus)));
  expect(got.map((e) => [e.data.fromStatus, e.data.toStatus])).toEqual([
    [null, "trialing"],
    ["trialing", "active"],
    ["active", "past_due"],
    ["past_due", "suspended"],
  ]);
  expect(got[0]?.data.tenantId).toBe(t.tenantId);
});

test("usage.threshold_reached at 80 % and 100 % of a limit, once each per period (from the cached counter)", async () => {
  const t = await subscribedTenant();
  const GiB = 1024 ** 3; // the free plan's storage_bytes limit
  const record = (quantity: number) =>
    recordUsage(h.deps, systemCtx("test", t.tenantId), {
      feature: "storage_bytes",
      quantity,
      idempotencyKey: crypto.randomUUID(),
      limit: GiB, // as an upload passes what assertFeature said: under 80 % no statement is spent
    });
  // the cached counter exists (built from the ledger), so each event's total comes from its increment
  expect(
    await getCurrentUsage(h.deps, systemCtx("test", t.tenantId), {
      feature: "storage_bytes",
      period: "never",
    }),
  ).toBe(0);
  expect((await record(Math.floor(0.5 * GiB))).counter).toBe(Math.floor(0.5 * GiB));
  expect((await eventsOf(t.tenantId)).filter((e) => e.type === "usage.threshold_reached")).toHaveLength(0);
  await record(Math.floor(0.35 * GiB)); // 85 %
  await record(1); // still past 80 %: not again
  await record(Math.floor(0.2 * GiB)); // 105 %
  await record(-Math.floor(0.5 * GiB));
  await record(Math.floor(0.5 * GiB)); // past both again: never twice in a period
  const got = (await t.verified(2))
    .filter((e) => e.type === "usage.threshold_reached")
    .sort((x, y) => Number(x.data.threshold) - Number(y.data.threshold));
  expect(got.map((e) => [e.data.feature, e.data.threshold, e.data.limit])).toEqual([
    ["storage_bytes", 80, GiB],
    ["storage_bytes", 100, GiB],
  ]);
  expect((await eventsOf(t.tenantId)).filter((e) => e.type === "usage.threshold_reached")).toHaveLength(2);
  expect(got[1]?.data.period).toBe("all");
});

test("an endpoint subscribed to some types gets only those; disabled endpoints get nothing", async () => {
  const tenant = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  await createWebhookEndpoint(h.deps, ctx, {
    url: `${receiver.url}/only-deleted-${tenant.code}`,
    events: ["user.deleted"],
  });
  const off = await createWebhookEndpoint(h.deps, ctx, {
    url: `${receiver.url}/off-${tenant.code}`,
    events: ["*"],
  });
  await execute(h.db, sql`update webhook_endpoints set enabled = false where id = ${off.endpoint.id}`);
  await createUser(h.db, tenant.id, { role: "owner" });
  const user = await createUser(h.db, tenant.id);
  await deleteTenantUser(h.deps, ctx, { userId: user.id });
  const [request] = await receiver.waitFor(`/only-deleted-${tenant.code}`, 1);
  expect(JSON.parse(request?.body ?? "{}").type).toBe("user.deleted");
  const rows = await execute<{ type: string; enabled: boolean }>(
    h.db,
    sql`select ev.type, e.enabled from webhook_deliveries d join webhook_events ev on ev.id = d.event_id join webhook_endpoints e on e.id = d.endpoint_id where d.endpoint_id = ${off.endpoint.id}`,
  );
  // only what came while it was enabled: its own creation used 2 of the free plan's 2 endpoints
  expect(rows).toEqual([
    { type: "usage.threshold_reached", enabled: false },
    { type: "usage.threshold_reached", enabled: false },
  ]);
});
