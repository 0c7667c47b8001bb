import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type PlinthEvent, webhookReceiver } from "../../examples/webhook-receiver/receiver.ts";
import { systemCtx } from "../../src/context.ts";
import { createWebhookEndpoint } from "../../src/webhooks/create-webhook-endpoint.ts";
import { deliverAttempt } from "../../src/webhooks/deliver.ts";
import { testWebhookEndpoint } from "../../src/webhooks/test-webhook-endpoint.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant, newMasterKey } from "../helpers/identity.ts";
import { ROOT } from "../helpers/process.ts";

const h = useTestApp({
  settings: {
    "Security:TenantSecrets:KeyId": "wh-example",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    "Webhooks:AllowPrivateDestinations": "true",
  },
});

const events: PlinthEvent[] = [];
let secret = "";
let server: ReturnType<typeof Bun.serve> | undefined;
let answered: number[] = [];
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    development: false,
    fetch: async (request) => {
      const response = await webhookReceiver(secret, (event) => {
        events.push(event);
      })(request);
      answered.push(response.status);
      return response;
    },
  });
});
afterAll(() => server?.stop(true));

test("the documented receiver verifies Plinth's deliveries and refuses forged ones", async () => {
  const tenant = await createTenant(h.db);
  const ctx = systemCtx("test", tenant.id);
  const created = await createWebhookEndpoint(h.deps, ctx, {
    url: `http://127.0.0.1:${server?.port}/plinth`,
    events: ["*"],
  });
  secret = created.secret;
  const { deliveryId } = await testWebhookEndpoint(h.deps, ctx, { id: created.endpoint.id });
  expect(await deliverAttempt(h.deps, { deliveryId, attempt: 1 })).toBe("succeeded");
  expect(events.map((e) => e.type)).toEqual(["webhook.test"]);
  expect(answered).toEqual([204]);
  // a request signed with another secret is a 400
  answered = [];
  const forged = await fetch(`http://127.0.0.1:${server?.port}/plinth`, {
    method: "POST",
    headers: {
      "webhook-id": "msg_forged",
      "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
      "webhook-signature": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    },
    body: JSON.stringify({ type: "user.deleted", timestamp: new Date().toISOString(), data: {} }),
  });
  expect(forged.status).toBe(400);
  expect(events).toHaveLength(1);
});

test("docs/webhooks.md shows the example file as it is", () => {
  const doc = readFileSync(join(ROOT, "docs/webhooks.md"), "utf8");
  const file = readFileSync(join(ROOT, "examples/webhook-receiver/receiver.ts"), "utf8");
  expect(doc).toContain(`\`\`\`ts\n${file}\`\`\``);
});
