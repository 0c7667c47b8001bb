import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, newMasterKey, signedInTenant } from "../helpers/identity.ts";

const app = useTestApp({
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "audit-wh",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    "Webhooks:AllowPrivateDestinations": "true",
  },
});

type Row = {
  action: string;
  actor_type: string;
  actor_id: string | null;
  target_id: string;
  details: Record<string, unknown>;
};
const eventsOf = (tenantId: string, prefix: string) =>
  execute<Row>(
    app.db,
    sql`select action, actor_type, actor_id, target_id, details from audit_events
        where tenant_id = ${tenantId} and action like ${`${prefix}%`} order by audit_events.id`,
  );

test("API keys: created, used for the first time (by the key), rolled, revoked; never the key itself", async () => {
  const o = await signedInTenant(app);
  const created = await app.request(
    "/api/tenant/api-keys",
    json({ name: "ci", scopes: ["users:read"] }, o.owner.headers),
  );
  expect(created.status).toBe(201);
  const issued = (await created.json()) as { id: string; key: string; prefix: string };
  for (let i = 0; i < 3; i++)
    expect(
      (await app.request("/api/tenant/users", { headers: { authorization: `Bearer ${issued.key}` } })).status,
    ).toBe(200);
  await app.deps.pending.settled();
  // a scope the key lacks: refused, and the refusal is recorded with the key as actor
  expect(
    (await app.request("/api/tenant/domains", { headers: { authorization: `Bearer ${issued.key}` } })).status,
  ).toBe(403);
  const rolled = await app.request(
    `/api/tenant/api-keys/${issued.id}/roll`,
    json({ gracePeriodSeconds: 60 }, o.owner.headers),
  );
  expect(rolled.status).toBe(200);
  const next = ((await rolled.json()) as { key: string }).key;
  expect(
    (await app.request(`/api/tenant/api-keys/${issued.id}`, { method: "DELETE", headers: o.owner.headers }))
      .status,
  ).toBe(204);
  // revoking again changes nothing and records nothing
  await app.request(`/api/tenant/api-keys/${issued.id}`, { method: "DELETE", headers: o.owner.headers });
  const events = await eventsOf(o.id, "api_key.");
  expect(events.map((e) => [e.action, e.actor_type, e.actor_id, e.target_id])).toEqual([
    ["api_key.created", "user", o.owner.id, issued.id],
    ["api_key.first_used", "apiKey", issued.id, issued.id],
    ["api_key.rolled", "user", o.owner.id, issued.id],
    ["api_key.revoked", "user", o.owner.id, issued.id],
  ]);
  // the key's public id part stays readable in the audit trail; its secret part is never there
  expect(events[0]?.details).toMatchObject({ name: "ci", scopes: ["users:read"], prefix: issued.prefix });
  expect(issued.prefix).toMatch(/^plk_[0-9A-Za-z]{12}$/);
  expect(events[2]?.details).toMatchObject({ graceSeconds: 60 });
  const [refused] = await eventsOf(o.id, "authorization.refused");
  expect(refused).toMatchObject({ actor_type: "apiKey", actor_id: issued.id });
  const all = JSON.stringify(await execute(app.db, sql`select * from audit_events`));
  for (const key of [issued.key, next]) expect(all).not.toContain(key.slice(-20));
});

test("webhook endpoints: created, updated, secret rotated, deleted; the URL's path and the secret stay out", async () => {
  const o = await signedInTenant(app);
  const created = await app.request(
    "/api/tenant/webhooks",
    json(
      { url: "http://127.0.0.1:9/hooks/T000/B000/secretpathtoken", events: ["user.created"] },
      o.owner.headers,
    ),
  );
  expect(created.status).toBe(201);
  const { endpoint, secret } = (await created.json()) as { endpoint: { id: string }; secret: string };
  const patched = await app.request(`/api/tenant/webhooks/${endpoint.id}`, {
    method: "PATCH",
    headers: { ...o.owner.headers, "content-type": "application/json" },
    body: JSON.stringify({ enabled: false }),
  });
  expect(patched.status).toBe(200);
  const rotated = await app.request(`/api/tenant/webhooks/${endpoint.id}/rotate-secret`, {
    method: "POST",
    headers: o.owner.headers,
  });
  expect(rotated.status).toBe(200);
  const newSecret = ((await rotated.json()) as { secret: string }).secret;
  expect(
    (await app.request(`/api/tenant/webhooks/${endpoint.id}`, { method: "DELETE", headers: o.owner.headers }))
      .status,
  ).toBe(204);
  const events = await eventsOf(o.id, "webhook_endpoint.");
  expect(events.map((e) => [e.action, e.actor_id, e.target_id, e.details])).toEqual([
    [
      "webhook_endpoint.created",
      o.owner.id,
      endpoint.id,
      { url: "http://127.0.0.1:9", events: ["user.created"] },
    ],
    ["webhook_endpoint.updated", o.owner.id, endpoint.id, { status: "disabled" }],
    ["webhook_endpoint.updated", o.owner.id, endpoint.id, { reason: "signing secret rotated" }],
    ["webhook_endpoint.deleted", o.owner.id, endpoint.id, { url: "http://127.0.0.1:9" }],
  ]);
  const all = JSON.stringify(await execute(app.db, sql`select * from audit_events`));
  for (const value of ["secretpathtoken", secret, newSecret]) expect(all).not.toContain(value);
});

test("outbound actions: a test send, a delivery retry and a replay each leave a row (issue #29)", async () => {
  const o = await signedInTenant(app);
  const created = await app.request(
    "/api/tenant/webhooks",
    json({ url: "http://127.0.0.1:9/hooks/outbound?token=never-audited", events: ["*"] }, o.owner.headers),
  );
  const { endpoint } = (await created.json()) as { endpoint: { id: string } };
  const sent = await app.request(`/api/tenant/webhooks/${endpoint.id}/test`, {
    method: "POST",
    headers: o.owner.headers,
  });
  expect(sent.status).toBe(202);
  const { eventId, deliveryId } = (await sent.json()) as { eventId: string; deliveryId: string };
  // no job loop here: the delivery is made to have failed, so it can be retried and replayed
  await execute(app.db, sql`update webhook_deliveries set status = 'failed' where id = ${deliveryId}`);
  const retried = await app.request(`/api/tenant/webhooks/${endpoint.id}/deliveries/${deliveryId}/retry`, {
    method: "POST",
    headers: o.owner.headers,
  });
  expect(retried.status).toBe(202);
  await execute(app.db, sql`update webhook_deliveries set status = 'failed' where id = ${deliveryId}`);
  const replayed = await app.request(
    `/api/tenant/webhooks/${endpoint.id}/replay`,
    json({ since: "2020-01-01T00:00:00Z" }, o.owner.headers),
  );
  expect(replayed.status).toBe(202);
  const rows = (await eventsOf(o.id, "webhook_")).filter((e) => e.action !== "webhook_endpoint.created");
  expect(rows.map((e) => [e.action, e.actor_id, e.target_id, e.details])).toEqual([
    ["webhook_endpoint.test_sent", o.owner.id, endpoint.id, { url: "http://127.0.0.1:9", event: eventId }],
    ["webhook_delivery.retried", o.owner.id, deliveryId, { attempts: 1, event: "webhook.test" }],
    ["webhook_endpoint.replayed", o.owner.id, endpoint.id, { count: 1, from: "2020-01-01T00:00:00.000Z" }],
  ]);
  expect(JSON.stringify(rows)).not.toContain("never-audited");
});

test("an export leaves a row in the chain it exports, with its filters; the platform's for every chain", async () => {
  const o = await signedInTenant(app);
  const ndjson = { accept: "application/x-ndjson" };
  const exported = await app.request("/api/tenant/audit-events?action=user.created", {
    headers: { ...o.owner.headers, ...ndjson },
  });
  expect(exported.status).toBe(200);
  const lines = (await exported.text()).trim().split("\n").filter(Boolean);
  const [row] = await eventsOf(o.id, "audit.");
  expect(row).toMatchObject({
    action: "audit.exported",
    actor_id: o.owner.id,
    target_id: o.id,
    details: { filter: ["action=user.created"], count: lines.length },
  });
  // the export's own row is not in the export it records
  expect(lines.some((l) => l.includes("audit.exported"))).toBe(false);
});
