import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { deliverAttempt } from "../../src/webhooks/deliver.ts";
import type { ResolvedAddress } from "../../src/webhooks/destinations.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fixtures/webhook-receiver.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, newMasterKey, signedInTenant } from "../helpers/identity.ts";

/** The resolver Plinth uses, made to answer what each test needs (names under .plinth.test). */
const dns: Record<string, string[]> = {
  "internal.plinth.test": ["127.0.0.1"],
  "metadata.plinth.test": ["169.254.169.254"],
  "mapped.plinth.test": ["93.184.216.34", "::ffff:10.1.2.3"],
  "rebind.plinth.test": ["93.184.216.34"],
};
const lookups: string[] = [];
const hostResolver = async (host: string): Promise<ResolvedAddress[]> => {
  lookups.push(host);
  const answer = dns[host];
  if (!answer) throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: "ENOTFOUND" });
  return answer.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
};

let receiver: WebhookReceiver;
beforeAll(() => {
  receiver = startWebhookReceiver();
});
afterAll(() => receiver.stop());

// Production-shaped: https only, and Webhooks:AllowPrivateDestinations at its default (false)
const h = useTestApp({
  environment: "Production",
  cache: "webhooks-ssrf",
  hostResolver,
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "wh-ssrf",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
});

async function refusal(headers: Record<string, string>, url: string) {
  const response = await h.request("/api/tenant/webhooks", json({ url, events: ["*"] }, headers));
  const body = (await response.json()) as { code: string; errors?: { path: string; message: string }[] };
  return { status: response.status, code: body.code, rule: body.errors?.[0]?.message.split(":")[0] };
}

test("Production refuses private destinations at registration with a 400 naming the rule", async () => {
  expect(h.deps.config.settings.Webhooks.AllowPrivateDestinations).toBe(false);
  const { headers } = (await signedInTenant(h)).owner;
  const port = receiver.port;
  const cases: [string, string][] = [
    [`http://127.0.0.1:${port}/`, "https_required"],
    [`https://127.0.0.1:${port}/`, "loopback"],
    // a host name that resolves to 127.0.0.1 through the resolver Plinth uses
    [`https://internal.plinth.test:${port}/`, "loopback"],
    ["https://metadata.plinth.test/latest/meta-data", "metadata"],
    ["https://169.254.169.254/latest/meta-data", "metadata"],
    ["https://[fd00:ec2::254]/", "metadata"],
    ["https://[::ffff:127.0.0.1]/", "loopback"],
    ["https://[fe80::1]/", "link_local"],
    ["https://100.64.0.7/", "cgnat"],
    ["https://192.168.0.10/", "private"],
    // one private address among public ones is enough to refuse
    ["https://mapped.plinth.test/", "private"],
    ["https://nowhere.plinth.test/", "unresolvable"],
  ];
  for (const [url, rule] of cases)
    expect({ url, ...(await refusal(headers, url)) }).toEqual({
      url,
      status: 400,
      code: "validation_failed",
      rule,
    });
  expect(lookups).toContain("internal.plinth.test");
  expect(receiver.received).toHaveLength(0);
});

test("a name that resolves somewhere else at delivery is checked on the address connected to: one failed attempt, nothing sent", async () => {
  const tenant = await signedInTenant(h);
  const { headers } = tenant.owner;
  const created = await h.request(
    "/api/tenant/webhooks",
    json({ url: `https://rebind.plinth.test:${receiver.port}/rebind`, events: ["*"] }, headers),
  );
  expect(created.status).toBe(201);
  const { endpoint } = (await created.json()) as { endpoint: { id: string } };
  // the DNS answer changes between the check and the delivery
  dns["rebind.plinth.test"] = ["127.0.0.1"];
  const sent = await h.request(`/api/tenant/webhooks/${endpoint.id}/test`, { method: "POST", headers });
  expect(sent.status).toBe(202);
  const { deliveryId } = (await sent.json()) as { deliveryId: string };
  expect(await deliverAttempt(h.deps, { deliveryId, attempt: 1 })).toBe("failed");
  const attempts = await execute<{ attempt: number; error_class: string; status_code: number | null }>(
    h.db,
    sql`select attempt, error_class, status_code from webhook_delivery_attempts where delivery_id = ${deliveryId}`,
  );
  expect(attempts).toEqual([{ attempt: 1, error_class: "destination_refused", status_code: null }]);
  // not a retry storm: one next attempt, on the schedule (Webhooks:RetrySeconds[0] = 5 s later)
  const jobs = await execute<{ attempt: string; delay: number }>(
    h.db,
    sql`select payload->>'attempt' as attempt, extract(epoch from (run_after - now()))::float as delay
        from background_jobs where kind = 'webhooks.deliver' and payload->>'deliveryId' = ${deliveryId} and status = 'pending'`,
  );
  // (attempt 1's own job is still queued here, as no job loop runs in this file: run, it finds the attempt made)
  expect(jobs.map((j) => j.attempt).sort()).toEqual(["1", "2"]);
  expect(jobs.find((j) => j.attempt === "2")?.delay).toBeGreaterThan(2);
  expect(await deliverAttempt(h.deps, { deliveryId, attempt: 1 })).toBe("skipped");
  expect(receiver.received).toHaveLength(0);
  const [row] = await execute<{ tenant_id: string }>(
    h.db,
    sql`select tenant_id from webhook_deliveries where id = ${deliveryId}`,
  );
  expect(row?.tenant_id).toBe(tenant.id);
});
