import { afterAll, beforeAll, expect, test } from "bun:test";
import { MetricReader } from "@opentelemetry/sdk-metrics";
import { sql } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { createDeps } from "../../src/deps.ts";
import { emitEvent } from "../../src/events/outbox.ts";
import { enqueueContext } from "../../src/jobs/enqueue.ts";
import { createTelemetry } from "../../src/telemetry/sdk.ts";
import { createWebhookEndpoint } from "../../src/webhooks/create-webhook-endpoint.ts";
import { deliverAttempt } from "../../src/webhooks/deliver.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fixtures/webhook-receiver.ts";
import { testConfig, useTestDatabase } from "../helpers/app.ts";
import { appDatabaseOf } from "../helpers/database.ts";
import { createTenant, newMasterKey } from "../helpers/identity.ts";

/** A reader the test collects from on demand. */
class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

let receiver: WebhookReceiver;
beforeAll(() => {
  receiver = startWebhookReceiver();
});
afterAll(() => receiver.stop());
const t = useTestDatabase();

test("each attempt counts in plinth.webhooks.attempts by outcome and error class, with its duration", async () => {
  const reader = new TestReader();
  const telemetry = createTelemetry({ serviceName: "plinth", metricReaders: [reader] });
  const config = testConfig({
    settings: {
      "Security:TenantSecrets:KeyId": "wh-metrics",
      "Security:TenantSecrets:MasterKey": newMasterKey(),
      "Webhooks:AllowPrivateDestinations": "true",
    },
  });
  const deps = await createDeps(config, {
    database: appDatabaseOf(t.database),
    telemetry,
    logWrite: () => {},
  });
  const tenant = await createTenant(t.database.db);
  receiver.respond("/metrics", [500]);
  const { endpoint } = await createWebhookEndpoint(deps, systemCtx("test", tenant.id), {
    url: `${receiver.url}/metrics`,
    events: ["*"],
  });
  const { deliveryIds } = await t.database.db.transaction((tx) =>
    emitEvent(tx, enqueueContext(deps), {
      tenantId: tenant.id,
      type: "webhook.test",
      data: { endpointId: endpoint.id, message: "metrics" },
    }),
  );
  const deliveryId = deliveryIds[0] ?? "";
  expect(await deliverAttempt(deps, { deliveryId, attempt: 1 })).toBe("failed");
  expect(await deliverAttempt(deps, { deliveryId, attempt: 2 })).toBe("succeeded");
  const { resourceMetrics } = await reader.collect();
  const metrics = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
  const attempts = metrics
    .filter((m) => m.descriptor.name === "plinth.webhooks.attempts")
    .flatMap((m) =>
      m.dataPoints.map((p) => ({ ...p.attributes, value: Number(p.value) }) as Record<string, unknown>),
    );
  expect(attempts).toContainEqual({
    outcome: "failed",
    "plinth.webhook.error_class": "http_status",
    value: 1,
  });
  expect(attempts).toContainEqual({ outcome: "succeeded", "plinth.webhook.error_class": "none", value: 1 });
  const durations = metrics
    .filter((m) => m.descriptor.name === "plinth.webhooks.attempt.duration")
    .flatMap((m) => m.dataPoints.map((p) => (p.value as { count: number }).count));
  expect(durations.reduce((a, b) => a + b, 0)).toBe(2);
  await telemetry.shutdown();
});

test("an attempt stopped by the job loop (shutdown, lease end) records nothing and throws, so the job runs it again", async () => {
  const config = testConfig({
    settings: {
      "Security:TenantSecrets:KeyId": "wh-abort",
      "Security:TenantSecrets:MasterKey": newMasterKey(),
      "Webhooks:AllowPrivateDestinations": "true",
    },
  });
  const deps = await createDeps(config, { database: appDatabaseOf(t.database), logWrite: () => {} });
  const tenant = await createTenant(t.database.db);
  receiver.respond("/stopped", [0]);
  const { endpoint } = await createWebhookEndpoint(deps, systemCtx("test", tenant.id), {
    url: `${receiver.url}/stopped`,
    events: ["*"],
  });
  const { deliveryIds } = await t.database.db.transaction((tx) =>
    emitEvent(tx, enqueueContext(deps), {
      tenantId: tenant.id,
      type: "webhook.test",
      data: { endpointId: endpoint.id, message: "stopped" },
    }),
  );
  const deliveryId = deliveryIds[0] ?? "";
  const controller = new AbortController();
  const running = deliverAttempt(deps, { deliveryId, attempt: 1 }, { signal: controller.signal });
  await receiver.waitFor("/stopped", 1);
  controller.abort(new Error("shutting down"));
  await expect(running).rejects.toThrow("shutting down");
  const [row] = await execute<{ status: string; attempts: number; logged: number }>(
    t.database.db,
    sql`select status, attempts, (select count(*)::int from webhook_delivery_attempts where delivery_id = ${deliveryId}) as logged
        from webhook_deliveries where id = ${deliveryId}`,
  );
  expect(row).toEqual({ status: "pending", attempts: 0, logged: 0 });
  // run again, it is made (and now answered)
  expect(await deliverAttempt(deps, { deliveryId, attempt: 1 })).toBe("succeeded");
});
