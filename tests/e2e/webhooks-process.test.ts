import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import type { Deps } from "../../src/deps.ts";
import { emitEvent } from "../../src/events/outbox.ts";
import { enqueueContext } from "../../src/jobs/enqueue.ts";
import { createWebhookEndpoint } from "../../src/webhooks/create-webhook-endpoint.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { createTenant, newMasterKey } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";

const masterKey = newMasterKey();
const received: { headers: Record<string, string>; body: string }[] = [];
let releaseHung: () => void = () => {};
const hung = new Promise<void>((resolve) => {
  releaseHung = resolve;
});
/** A real receiver: its first request never gets an answer (the process sending it is killed meanwhile). */
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  development: false,
  fetch: async (request) => {
    received.push({ headers: Object.fromEntries(request.headers.entries()), body: await request.text() });
    if (received.length === 1) await hung;
    return new Response("ok");
  },
});
const children: Child[] = [];
afterAll(() => {
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
  releaseHung();
  receiver.stop(true);
});

const t = useTestDatabase();
const settings = {
  "Security:TenantSecrets:KeyId": "wh-e2e",
  "Security:TenantSecrets:MasterKey": masterKey,
  "Webhooks:AllowPrivateDestinations": "true",
};
let deps: Deps;
beforeAll(async () => {
  deps = await testDeps(testConfig({ settings }), { database: t.database });
});

function startApi(): Child {
  const child = spawnBun(["src/server.ts"], {
    DATABASE_URL: t.url,
    PORT: "0",
    Database__PoolSize: "3",
    Logging__Level: "info",
    Security__TenantSecrets__KeyId: settings["Security:TenantSecrets:KeyId"],
    Security__TenantSecrets__MasterKey: masterKey,
    Webhooks__AllowPrivateDestinations: "true",
    // longer than the test waits: the first attempt is still in flight when the process dies
    Webhooks__TimeoutSeconds: "120",
    BackgroundProcessing__JobPollSeconds: "1",
  });
  children.push(child);
  return child;
}

test("an API process SIGKILLed mid-delivery loses nothing: another process delivers it, once recorded", async () => {
  const tenant = await createTenant(t.database.db);
  const { endpoint, secret } = await createWebhookEndpoint(deps, systemCtx("e2e", tenant.id), {
    url: `http://127.0.0.1:${receiver.port}/hook`,
    events: ["*"],
  });
  const first = startApi();
  await first.waitForLine((l) => l.includes('"msg":"background loops started"'), 30_000);
  // the change commits; the first process picks the delivery up and is killed while the receiver holds it
  const { deliveryIds } = await t.database.db.transaction((tx) =>
    emitEvent(tx, enqueueContext(deps), {
      tenantId: tenant.id,
      type: "webhook.test",
      data: { endpointId: endpoint.id, message: "survives a SIGKILL" },
    }),
  );
  const deliveryId = deliveryIds[0] ?? "";
  await waitFor(() => received.length === 1, { timeoutMs: 30_000, what: "the first process to send" });
  first.proc.kill("SIGKILL");
  await first.proc.exited;
  const [job] = await execute<{ id: string; status: string; attempts: number }>(
    t.database.db,
    sql`select id::text, status, attempts from background_jobs where kind = 'webhooks.deliver' and payload->>'deliveryId' = ${deliveryId}`,
  );
  expect(job?.status).toBe("processing");
  const [before] = await execute<{ status: string; attempts: number }>(
    t.database.db,
    sql`select status, attempts from webhook_deliveries where id = ${deliveryId}`,
  );
  expect(before).toEqual({ status: "pending", attempts: 0 });
  // the five-minute job lease runs out (moved forward here rather than waited for); a second process takes over
  await execute(
    t.database.db,
    sql`update background_jobs set locked_until = now() - interval '1 second' where id = ${job?.id ?? "0"}::bigint`,
  );
  const second = startApi();
  await waitFor(() => received.length === 2, { timeoutMs: 30_000, what: "the second process to deliver" });
  const hook = new Webhook(secret);
  for (const r of received) {
    const headers = {
      "webhook-id": r.headers["webhook-id"] ?? "",
      "webhook-timestamp": r.headers["webhook-timestamp"] ?? "",
      "webhook-signature": r.headers["webhook-signature"] ?? "",
    };
    expect((hook.verify(r.body, headers) as { data: { message: string } }).data.message).toBe(
      "survives a SIGKILL",
    );
  }
  // the same message id both times: a receiver that saw the first one deduplicates
  expect(received[1]?.headers["webhook-id"]).toBe(received[0]?.headers["webhook-id"] ?? "");
  const after = await waitFor(async () => {
    const [row] = await execute<{ status: string; attempts: number }>(
      t.database.db,
      sql`select status, attempts from webhook_deliveries where id = ${deliveryId}`,
    );
    return row?.status === "succeeded" ? row : null;
  });
  expect(after.attempts).toBe(1);
  const attempts = await execute<{ attempt: number; status_code: number }>(
    t.database.db,
    sql`select attempt, status_code from webhook_delivery_attempts where delivery_id = ${deliveryId}`,
  );
  expect(attempts).toEqual([{ attempt: 1, status_code: 200 }]);
  // the API process also seeded the daily pruning of the delivery log
  const schedules = await execute<{ kind: string; cron: string }>(
    t.database.db,
    sql`select kind, cron from job_schedules where name = 'webhooks.prune'`,
  );
  expect(schedules).toEqual([{ kind: "webhooks.prune", cron: "17 3 * * *" }]);
  second.proc.kill("SIGTERM");
  expect(await second.proc.exited).toBe(0);
}, 90_000);
