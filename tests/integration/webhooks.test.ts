import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { emitEvent } from "../../src/events/outbox.ts";
import { enqueueContext } from "../../src/jobs/enqueue.ts";
import { createJobRegistry } from "../../src/jobs/registry.ts";
import { type Background, startBackground } from "../../src/loops/background.ts";
import { deliverAttempt } from "../../src/webhooks/deliver.ts";
import { pruneDeliveryLog, webhookJobs } from "../../src/webhooks/delivery-prune.ts";
import { redactedDestination } from "../../src/webhooks/endpoints.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fixtures/webhook-receiver.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import {
  json,
  newMasterKey,
  type SignedInTenant,
  signedInPlatformAdmin,
  signedInTenant,
} from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";

let receiver: WebhookReceiver;
let background: Background | undefined;
beforeAll(() => {
  receiver = startWebhookReceiver();
});
afterAll(async () => {
  await background?.stop(5_000);
  receiver.stop();
});

const h = useTestApp({
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "wh-test",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    "Webhooks:AllowPrivateDestinations": "true",
    // the schedule shortened: two immediate retries, so a third attempt is the last
    "Webhooks:RetrySeconds:0": "0",
    "Webhooks:RetrySeconds:1": "0",
    "BackgroundProcessing:JobPollSeconds": "1",
  },
});

beforeAll(async () => {
  background = await startBackground(h.deps, { registry: createJobRegistry().add(h.deps, webhookJobs) });
});

async function register(
  who: SignedInTenant,
  path: string,
  events: string[] = ["*"],
): Promise<{ id: string; secret: string }> {
  const response = await h.request(
    "/api/tenant/webhooks",
    json({ url: `${receiver.url}${path}`, events }, who.owner.headers),
  );
  expect(response.status).toBe(201);
  const body = (await response.json()) as { endpoint: { id: string }; secret: string };
  return { id: body.endpoint.id, secret: body.secret };
}

const post = (path: string, who: SignedInTenant, body?: unknown) =>
  h.request(
    path,
    body === undefined ? { method: "POST", headers: who.owner.headers } : json(body, who.owner.headers),
  );

interface DeliveryBody {
  status: string;
  attemptCount: number;
  eventType: string;
  attempts: { attempt: number; statusCode: number | null; errorClass: string | null }[];
}

async function deliveries(who: SignedInTenant, endpointId: string, query = "") {
  const response = await h.request(`/api/tenant/webhooks/${endpointId}/deliveries${query}`, {
    headers: who.owner.headers,
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { items: (DeliveryBody & { id: string })[]; nextCursor: string | null };
}

const headersOf = (r: { headers: Record<string, string> }) => ({
  "webhook-id": r.headers["webhook-id"] ?? "",
  "webhook-timestamp": r.headers["webhook-timestamp"] ?? "",
  "webhook-signature": r.headers["webhook-signature"] ?? "",
});

describe("endpoints", () => {
  test("registering answers a whsec_ secret once; reads never show it; another tenant gets 404", async () => {
    const a = await signedInTenant(h);
    const b = await signedInTenant(h);
    const { id, secret } = await register(a, "/a");
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice(6), "base64").length).toBeGreaterThanOrEqual(24);
    const shown = await h.request(`/api/tenant/webhooks/${id}`, { headers: a.owner.headers });
    expect(shown.status).toBe(200);
    expect(await shown.text()).not.toContain(secret.slice(6));
    const listed = await h.request("/api/tenant/webhooks", { headers: a.owner.headers });
    expect(((await listed.json()) as { items: { id: string }[] }).items.map((e) => e.id)).toEqual([id]);
    for (const [method, path] of [
      ["GET", `/api/tenant/webhooks/${id}`],
      ["PATCH", `/api/tenant/webhooks/${id}`],
      ["DELETE", `/api/tenant/webhooks/${id}`],
      ["POST", `/api/tenant/webhooks/${id}/test`],
      ["POST", `/api/tenant/webhooks/${id}/rotate-secret`],
      ["GET", `/api/tenant/webhooks/${id}/deliveries`],
    ] as const) {
      const response = await h.request(path, {
        method,
        headers: { ...b.owner.headers, "content-type": "application/json" },
        body: method === "PATCH" ? JSON.stringify({ enabled: false }) : undefined,
      });
      expect(`${method} ${path} ${response.status}`).toBe(`${method} ${path} 404`);
    }
    const bList = await h.request("/api/tenant/webhooks", { headers: b.owner.headers });
    expect(((await bList.json()) as { items: unknown[] }).items).toEqual([]);
    // no log line carries the secret
    expect(h.logs.some((line) => line.includes(secret.slice(6)))).toBe(false);
  });

  test("unknown event types are a 400 naming the field; the plan's limit is a 403", async () => {
    const a = await signedInTenant(h);
    const bad = await h.request(
      "/api/tenant/webhooks",
      json({ url: `${receiver.url}/x`, events: ["user.exploded"] }, a.owner.headers),
    );
    expect(bad.status).toBe(400);
    const problem = (await bad.json()) as { errors: { path: string; message: string }[] };
    // the event types are an enum in the document: the error names the item that is not one
    expect(problem.errors[0]?.path).toBe("events.0");
    // the free plan allows two endpoints
    await register(a, "/one");
    await register(a, "/two");
    const third = await h.request(
      "/api/tenant/webhooks",
      json({ url: `${receiver.url}/three`, events: ["*"] }, a.owner.headers),
    );
    expect(third.status).toBe(403);
    expect(((await third.json()) as { code: string }).code).toBe("usage_limit_reached");
    // no cache here: the second endpoint's usage, summed from the ledger, is 100 % (and past 80 %)
    const notices = await execute<{ threshold: number }>(
      h.db,
      sql`select (data->>'threshold')::int as threshold from webhook_events
          where tenant_id = ${a.id} and type = 'usage.threshold_reached' and data->>'feature' = 'webhook_endpoints'
          order by 1`,
    );
    expect(notices.map((n) => n.threshold)).toEqual([80, 100]);
  });

  test("PATCH changes events and enabled; DELETE removes the endpoint and frees the plan's slot", async () => {
    const a = await signedInTenant(h);
    const { id } = await register(a, "/patch");
    const changed = await h.request(`/api/tenant/webhooks/${id}`, {
      method: "PATCH",
      headers: { ...a.owner.headers, "content-type": "application/json" },
      body: JSON.stringify({ events: ["user.created", "user.deleted"], enabled: false }),
    });
    expect(changed.status).toBe(200);
    const body = (await changed.json()) as { events: string[]; enabled: boolean; disabledAt: string | null };
    expect(body.events).toEqual(["user.created", "user.deleted"]);
    expect(body.enabled).toBe(false);
    expect(body.disabledAt).not.toBeNull();
    await register(a, "/second");
    const removed = await h.request(`/api/tenant/webhooks/${id}`, {
      method: "DELETE",
      headers: a.owner.headers,
    });
    expect(removed.status).toBe(204);
    await register(a, "/third"); // the slot came back
    const [secrets] = await execute<{ n: number }>(
      h.db,
      sql`select count(*)::int as n from tenant_secrets where name like ${`webhooks.${id}.%`}`,
    );
    expect(secrets?.n).toBe(0);
  });
});

describe("delivery", () => {
  test("a committed change sends exactly one delivery, verified by standardwebhooks", async () => {
    const a = await signedInTenant(h);
    const { id, secret } = await register(a, "/users", ["user.created"]);
    const created = await h.request(
      "/api/tenant/users",
      json(
        {
          email: `n${crypto.randomUUID().slice(0, 8)}@example.com`,
          name: "New",
          password: "a long and unusual passphrase 7",
        },
        a.owner.headers,
      ),
    );
    expect(created.status).toBe(201);
    const { id: userId } = (await created.json()) as { id: string };
    const [request] = await receiver.waitFor("/users", 1);
    if (!request) throw new Error("no request");
    const payload = new Webhook(secret).verify(request.body, headersOf(request)) as {
      type: string;
      timestamp: string;
      data: { userId: string; role: string };
    };
    expect(payload.type).toBe("user.created");
    expect(payload.data.userId).toBe(userId);
    expect(payload.data.role).toBe("member");
    expect(request.headers["webhook-id"]).toMatch(/^msg_[0-9a-f]{32}$/);
    const log = await waitFor(async () => {
      const page = await deliveries(a, id);
      return page.items[0]?.status === "succeeded" ? page : null;
    });
    expect(log.items).toHaveLength(1);
    expect(log.items[0]?.attempts.map((x) => x.statusCode)).toEqual([200]);
    // nothing else is on its way: once the loop records the run (its completion is batched, so it may
    // trail the delivery's own row by a moment) no job of this delivery is left, and still one request
    await waitFor(async () => {
      const [left] = await execute<{ n: number }>(
        h.db,
        sql`select count(*)::int as n from background_jobs where kind = 'webhooks.deliver' and status in ('pending', 'processing', 'failed')
              and payload->>'deliveryId' = ${log.items[0]?.id ?? ""}`,
      );
      return left?.n === 0 ? true : null;
    });
    expect(receiver.at("/users")).toHaveLength(1);
  });

  test("a rolled-back change sends nothing: no event, no delivery, no job", async () => {
    const a = await signedInTenant(h);
    const { id } = await register(a, "/rollback");
    const before = await execute<{ n: number }>(h.db, sql`select count(*)::int as n from background_jobs`);
    const marker = `rolled-back-${crypto.randomUUID()}`;
    await expect(
      h.db.transaction(async (tx) => {
        await emitEvent(tx, enqueueContext(h.deps), {
          tenantId: a.id,
          type: "webhook.test",
          data: { endpointId: id, message: marker },
        });
        throw new Error("the change fails");
      }),
    ).rejects.toThrow("the change fails");
    const after = await execute<{ n: number }>(h.db, sql`select count(*)::int as n from background_jobs`);
    expect(after[0]?.n).toBe(before[0]?.n ?? -1);
    const events = await execute(h.db, sql`select 1 from webhook_events where data->>'message' = ${marker}`);
    expect(events).toHaveLength(0);
    expect((await deliveries(a, id)).items).toHaveLength(0);
    // the same event committed is delivered
    await h.db.transaction((tx) =>
      emitEvent(tx, enqueueContext(h.deps), {
        tenantId: a.id,
        type: "webhook.test",
        data: { endpointId: id, message: marker },
      }),
    );
    const [got] = await receiver.waitFor("/rollback", 1);
    expect(got?.body).toContain(marker);
  });

  test("a receiver failing twice then succeeding gets it on the third attempt, all three signed alike", async () => {
    const a = await signedInTenant(h);
    receiver.respond("/flaky", [500, 503]);
    const { id, secret } = await register(a, "/flaky");
    const sent = await post(`/api/tenant/webhooks/${id}/test`, a);
    expect(sent.status).toBe(202);
    const requests = await receiver.waitFor("/flaky", 3);
    const hook = new Webhook(secret);
    for (const r of requests)
      expect((hook.verify(r.body, headersOf(r)) as { type: string }).type).toBe("webhook.test");
    expect(new Set(requests.map((r) => r.headers["webhook-id"])).size).toBe(1);
    const log = await waitFor(async () => {
      const page = await deliveries(a, id);
      return page.items[0]?.status === "succeeded" ? page : null;
    });
    const [delivery] = log.items;
    expect(delivery?.attemptCount).toBe(3);
    expect(delivery?.attempts.map((x) => [x.statusCode, x.errorClass])).toEqual([
      [500, "http_status"],
      [503, "http_status"],
      [200, null],
    ]);
    expect(receiver.at("/flaky")).toHaveLength(3);
  });

  test("after a rotation both secrets verify during the overlap; the old one alone after it", async () => {
    const a = await signedInTenant(h);
    const { id, secret: oldSecret } = await register(a, "/rotate");
    const rotated = await post(`/api/tenant/webhooks/${id}/rotate-secret`, a);
    expect(rotated.status).toBe(200);
    const { secret: newSecret, endpoint } = (await rotated.json()) as {
      secret: string;
      endpoint: { previousSecretExpiresAt: string };
    };
    expect(newSecret).not.toBe(oldSecret);
    expect(new Date(endpoint.previousSecretExpiresAt).getTime()).toBeGreaterThan(Date.now() + 23 * 3_600_000);
    expect((await post(`/api/tenant/webhooks/${id}/test`, a)).status).toBe(202);
    const [request] = await receiver.waitFor("/rotate", 1);
    if (!request) throw new Error("no request");
    expect(request.headers["webhook-signature"]?.split(" ")).toHaveLength(2);
    expect(() => new Webhook(oldSecret).verify(request.body, headersOf(request))).not.toThrow();
    expect(() => new Webhook(newSecret).verify(request.body, headersOf(request))).not.toThrow();
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(24, 7).toString("base64")}`).verify(request.body, headersOf(request)),
    ).toThrow();
    // overlap over: only the new secret signs
    await execute(
      h.db,
      sql`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ${id}`,
    );
    expect((await post(`/api/tenant/webhooks/${id}/test`, a)).status).toBe(202);
    const [, later] = await receiver.waitFor("/rotate", 2);
    if (!later) throw new Error("no request");
    expect(later.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
    expect(() => new Webhook(newSecret).verify(later.body, headersOf(later))).not.toThrow();
    expect(() => new Webhook(oldSecret).verify(later.body, headersOf(later))).toThrow();
  });

  test("a redirect is a failed attempt, never followed", async () => {
    const a = await signedInTenant(h);
    receiver.respond("/moved", [302], 302);
    const { id } = await register(a, "/moved");
    await post(`/api/tenant/webhooks/${id}/test`, a);
    const log = await waitFor(async () => {
      const page = await deliveries(a, id);
      return page.items[0]?.status === "failed" ? page : null;
    });
    expect(log.items[0]?.attempts.map((x) => x.statusCode)).toEqual([302, 302, 302]);
    expect(receiver.at("/elsewhere")).toHaveLength(0);
  });
});

describe("delivery log", () => {
  test("a failed delivery is retried by hand, failed ones replayed since a time; pages by cursor", async () => {
    const a = await signedInTenant(h);
    receiver.respond("/down", [], 500);
    const { id } = await register(a, "/down");
    await post(`/api/tenant/webhooks/${id}/test`, a);
    await post(`/api/tenant/webhooks/${id}/test`, a);
    const failed = await waitFor(async () => {
      const page = await deliveries(a, id);
      return page.items.length === 2 && page.items.every((d) => d.status === "failed") ? page : null;
    });
    expect(failed.items.map((d) => d.attemptCount)).toEqual([3, 3]);
    const first = await deliveries(a, id, "?limit=1");
    expect(first.items).toHaveLength(1);
    expect(first.nextCursor).not.toBeNull();
    const second = await deliveries(a, id, `?limit=1&cursor=${first.nextCursor}`);
    expect(second.items).toHaveLength(1);
    expect(second.items[0]?.id).not.toBe(first.items[0]?.id);
    expect(second.nextCursor).toBeNull();

    receiver.respond("/down", [], 200);
    const target = first.items[0]?.id ?? "";
    const retried = await post(`/api/tenant/webhooks/${id}/deliveries/${target}/retry`, a);
    expect(retried.status).toBe(202);
    expect(((await retried.json()) as { status: string }).status).toBe("pending");
    await waitFor(
      async () => (await deliveries(a, id)).items.find((d) => d.id === target)?.status === "succeeded",
    );
    const replay = await post(`/api/tenant/webhooks/${id}/replay`, a, {
      since: new Date(Date.now() - 60_000).toISOString(),
    });
    expect(replay.status).toBe(202);
    expect(((await replay.json()) as { replayed: number }).replayed).toBe(1);
    const all = await waitFor(async () => {
      const page = await deliveries(a, id);
      return page.items.every((d) => d.status === "succeeded") ? page : null;
    });
    expect(all.items.map((d) => d.attemptCount).sort()).toEqual([4, 4]);
    const other = await signedInTenant(h);
    const foreign = await post(`/api/tenant/webhooks/${id}/deliveries/${target}/retry`, other);
    expect(foreign.status).toBe(404);
    // a delivery still pending is not retried by hand: its next attempt is scheduled
    await execute(h.db, sql`update webhook_deliveries set status = 'pending' where id = ${target}`);
    const pending = await post(`/api/tenant/webhooks/${id}/deliveries/${target}/retry`, a);
    expect(pending.status).toBe(409);
  });

  test("an endpoint failing for Webhooks:DisableAfterDays is disabled and the tenant told by an event", async () => {
    const a = await signedInTenant(h);
    receiver.respond("/dead", [], 500);
    const { id } = await register(a, "/dead", ["user.deleted"]);
    const watcher = await register(a, "/watcher", ["webhook.endpoint_disabled"]);
    // the streak began six days ago
    await execute(
      h.db,
      sql`update webhook_endpoints set failing_since = now() - interval '6 days' where id = ${id}`,
    );
    const { deliveryIds } = await h.db.transaction((tx) =>
      emitEvent(tx, enqueueContext(h.deps), {
        tenantId: a.id,
        type: "user.deleted",
        data: { userId: crypto.randomUUID() },
      }),
    );
    expect(deliveryIds).toHaveLength(1);
    const [told] = await receiver.waitFor("/watcher", 1);
    if (!told) throw new Error("not told");
    const payload = new Webhook(watcher.secret).verify(told.body, headersOf(told)) as {
      type: string;
      data: { endpointId: string };
    };
    expect(payload.type).toBe("webhook.endpoint_disabled");
    expect(payload.data.endpointId).toBe(id);
    const shown = (await (
      await h.request(`/api/tenant/webhooks/${id}`, { headers: a.owner.headers })
    ).json()) as {
      enabled: boolean;
      disabledReason: string;
    };
    expect(shown.enabled).toBe(false);
    expect(shown.disabledReason).toContain("5 days");
    // and recorded in the tenant's audit log, by the delivery job (docs/audit.md)
    const audited = await execute<{ actor_id: string; details: { status: string; reason: string } }>(
      h.db,
      sql`select actor_id, details from audit_events
          where tenant_id = ${a.id} and action = 'webhook_endpoint.updated' and target_id = ${id}`,
    );
    expect(audited).toEqual([
      { actor_id: "webhooks", details: { status: "disabled", reason: "every attempt failed for 5 days" } },
    ]);
    // enabling again clears the streak
    const enabled = await h.request(`/api/tenant/webhooks/${id}`, {
      method: "PATCH",
      headers: { ...a.owner.headers, "content-type": "application/json" },
      body: JSON.stringify({ enabled: true }),
    });
    expect(((await enabled.json()) as { failingSince: string | null }).failingSince).toBeNull();
  });

  test("an attempt already recorded is not made again (a taken-over job finds it done)", async () => {
    const a = await signedInTenant(h);
    const { id } = await register(a, "/once");
    const { deliveryIds } = await h.db.transaction((tx) =>
      emitEvent(tx, enqueueContext(h.deps), {
        tenantId: a.id,
        type: "webhook.test",
        data: { endpointId: id, message: "once" },
      }),
    );
    await receiver.waitFor("/once", 1);
    await waitFor(async () => (await deliveries(a, id)).items[0]?.status === "succeeded");
    const again = await deliverAttempt(h.deps, { deliveryId: deliveryIds[0] ?? "", attempt: 1 });
    expect(again).toBe("skipped");
    expect(receiver.at("/once")).toHaveLength(1);
  });

  test("the log is pruned after Webhooks:LogRetentionDays", async () => {
    const a = await signedInTenant(h);
    const { id } = await register(a, "/prune");
    await post(`/api/tenant/webhooks/${id}/test`, a);
    await waitFor(async () => (await deliveries(a, id)).items[0]?.status === "succeeded");
    const clock = new ManualClock(new Date(Date.now() + 31 * 86_400_000).toISOString());
    const pruned = await pruneDeliveryLog({ ...h.deps, clock });
    expect(pruned).toBeGreaterThanOrEqual(1);
    expect((await deliveries(a, id)).items).toHaveLength(0);
  });
});

describe("admin view", () => {
  test("a platform administrator lists a tenant's endpoints without secrets", async () => {
    const a = await signedInTenant(h);
    const { id, secret } = await register(a, "/admin-view");
    const admin = await signedInPlatformAdmin(h);
    const response = await h.request(`/api/admin/tenants/${a.id}/webhooks`, { headers: admin.headers });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toContain(id);
    expect(text).not.toContain(secret.slice(6));
  });

  test("the admin list redacts each URL's query (a receiver's token); the tenant's own list keeps it", async () => {
    const a = await signedInTenant(h);
    const { id } = await register(a, "/admin-redacted?token=hook-s3cr3t&x=1");
    const admin = await signedInPlatformAdmin(h);
    const response = await h.request(`/api/admin/tenants/${a.id}/webhooks`, { headers: admin.headers });
    const body = (await response.json()) as { items: { id: string; url: string }[] };
    expect(body.items.find((e) => e.id === id)?.url).toBe(`${receiver.url}/admin-redacted?…`);
    expect(JSON.stringify(body)).not.toContain("hook-s3cr3t");
    const own = (await (await h.request("/api/tenant/webhooks", { headers: a.owner.headers })).json()) as {
      items: { id: string; url: string }[];
    };
    expect(own.items.find((e) => e.id === id)?.url).toBe(
      `${receiver.url}/admin-redacted?token=hook-s3cr3t&x=1`,
    );
  });

  test("a URL's user:password part never shows in the redacted form", () => {
    expect(redactedDestination("https://user:pa55@hooks.example.com:8443/in?k=v")).toBe(
      "https://hooks.example.com:8443/in?…",
    );
    expect(redactedDestination("https://hooks.example.com/in")).toBe("https://hooks.example.com/in");
    expect(redactedDestination("not a url")).toBe("(not a URL)");
  });
});
