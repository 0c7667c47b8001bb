// Webhook delivery benchmark, Plinth's outbox and job loop against a local receiver.
//   bun run bench:webhooks [--deliveries 2000] [--latency 200] [--tenants 8] [--runs 3]
//                          [--database postgres://postgres@127.0.0.1:5432/postgres]
// Throughput: `--deliveries` events committed through the outbox (one delivery each, spread over
// `--tenants` tenants), then the job loop started; deliveries/s until the receiver has them all.
// Peers in the same run: as many no-op jobs grouped by the same tenants through the same job loop
// (the queue's own ceiling), and the same signed POSTs sent straight from a pool of as many senders
// as the loop has slots (no database, no queue: the receiver's ceiling on this machine).
// Latency: sequential events with the loop idle; commit (the transaction resolved) → receipt at the
// receiver, p50/p99. Peer in the same run: a no-op job's enqueue commit → handler start (the queue's
// own delay), so the difference is what signing, the secret read, HTTP and recording add.
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { z } from "zod";
import { loadConfig } from "../src/config/load.ts";
import { systemCtx } from "../src/context.ts";
import { openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrator.ts";
import { closeDeps, createDeps } from "../src/deps.ts";
import { emitEvent } from "../src/events/outbox.ts";
import { enqueue, enqueueContext, enqueueMany } from "../src/jobs/enqueue.ts";
import { createJobRegistry, defineJob } from "../src/jobs/registry.ts";
import { startBackground } from "../src/loops/background.ts";
import { seedCatalog } from "../src/seed.ts";
import { createTenant } from "../src/tenancy/tenants.ts";
import { createWebhookEndpoint } from "../src/webhooks/create-webhook-endpoint.ts";
import { deliveryBody } from "../src/webhooks/deliver.ts";
import { webhookJobs } from "../src/webhooks/delivery-prune.ts";
import { newSigningSecret, signedHeaders } from "../src/webhooks/signing.ts";
import { percentile } from "./stats.ts";

const { values: args } = parseArgs({
  options: {
    deliveries: { type: "string", default: "2000" },
    latency: { type: "string", default: "200" },
    tenants: { type: "string", default: "8" },
    runs: { type: "string", default: "3" },
    database: { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
  },
});
const DELIVERIES = Number(args.deliveries);
const LATENCY_N = Number(args.latency);
const TENANTS = Number(args.tenants);
const RUNS = Number(args.runs);
const SERVER = new URL(args.database);
const SLOTS = 4;
const log = (message: string) => process.stderr.write(`${message}\n`);
const median = (xs: number[]) => percentile(xs, 50);

async function recreate(name: string): Promise<string> {
  const admin = postgres(SERVER.toString(), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`drop database if exists "${name}" with (force)`);
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  const u = new URL(SERVER);
  u.pathname = `/${name}`;
  return u.toString();
}

// the receiver: answers 200 at once and notes when each message arrived
const arrivals = new Map<string, number>();
let arrived = 0;
let onArrival: () => void = () => {};
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  development: false,
  fetch: async (request) => {
    const at = performance.now();
    const body = (await request.json()) as { data?: { message?: string } };
    const marker = body.data?.message;
    if (marker) arrivals.set(marker, at);
    arrived++;
    onArrival();
    return new Response("ok");
  },
});
const receiverUrl = `http://127.0.0.1:${receiver.port}/hook`;
const until = (count: () => boolean) =>
  new Promise<void>((resolve) => {
    onArrival = () => {
      if (count()) resolve();
    };
    onArrival();
  });

const url = await recreate("bench_webhooks");
{
  const database = await openDatabase(url, { poolSize: 2 });
  await migrate(database.db);
  await seedCatalog({ database }, systemCtx("bench"));
  await database.close();
}
const config = loadConfig({
  env: {
    DATABASE_URL: url,
    Logging__Level: "error",
    PLINTH_TENANT_SECRET_KEY_ID: "bench",
    PLINTH_TENANT_SECRET_MASTER_KEY: randomBytes(32).toString("base64"),
    Webhooks__AllowPrivateDestinations: "true",
    Database__PoolSize: "10",
    BackgroundProcessing__JobParallelism: String(SLOTS),
    BackgroundProcessing__JobBatchSize: "5",
  },
  configDir: "/nonexistent",
});
const deps = await createDeps(config, { logWrite: () => {} });
const db = deps.database.db;
const tenants: string[] = [];
for (let i = 0; i < TENANTS; i++) {
  const tenant = await createTenant(deps, systemCtx("bench"), { code: `bench-${i}`, name: `Bench ${i}` });
  await createWebhookEndpoint(deps, systemCtx("bench", tenant.id), {
    url: receiverUrl,
    events: ["webhook.test"],
  });
  tenants.push(tenant.id);
}
const endpointIds = (await db.execute(`select id, tenant_id from webhook_endpoints`)) as unknown as {
  id: string;
  tenant_id: string;
}[];
const endpointOf = new Map(endpointIds.map((r) => [r.tenant_id, r.id]));

async function commitEvents(count: number, marker: (i: number) => string) {
  for (let i = 0; i < count; i += 100) {
    await db.transaction(async (tx) => {
      for (let j = i; j < Math.min(count, i + 100); j++) {
        const tenantId = tenants[j % tenants.length] as string;
        await emitEvent(tx, enqueueContext(deps), {
          tenantId,
          type: "webhook.test",
          data: { endpointId: endpointOf.get(tenantId) ?? "", message: marker(j) },
        });
      }
    });
  }
}

async function plinthThroughput(run: number): Promise<number> {
  await commitEvents(DELIVERIES, (j) => `t${run}-${j}`);
  await db.execute("analyze background_jobs");
  const target = arrived + DELIVERIES;
  const done = until(() => arrived >= target);
  const start = performance.now();
  const background = await startBackground(deps, { registry: createJobRegistry().add(deps, webhookJobs) });
  await done;
  const seconds = (performance.now() - start) / 1000;
  await background.stop(5_000);
  return DELIVERIES / seconds;
}

/** The queue's own ceiling: as many no-op jobs, grouped by the same tenants, drained by the same loop. */
async function noopThroughput(): Promise<number> {
  let done = 0;
  let finish: () => void = () => {};
  const finished = new Promise<void>((r) => (finish = r));
  const noop = defineJob("bench.noop", z.object({}).passthrough(), () => {
    if (++done === DELIVERIES) finish();
  });
  await enqueueMany(
    db,
    enqueueContext(deps),
    Array.from({ length: DELIVERIES }, (_, i) => ({
      job: noop,
      payload: {},
      options: { tenantId: tenants[i % tenants.length] as string },
    })),
  );
  await db.execute("analyze background_jobs");
  const start = performance.now();
  const background = await startBackground(deps, { registry: createJobRegistry([noop]) });
  await finished;
  const seconds = (performance.now() - start) / 1000;
  await background.stop(5_000);
  return DELIVERIES / seconds;
}

async function directThroughput(): Promise<number> {
  const secret = newSigningSecret();
  const target = arrived + DELIVERIES;
  const done = until(() => arrived >= target);
  let next = 0;
  const start = performance.now();
  const sender = async () => {
    while (next < DELIVERIES) {
      const i = next++;
      const body = deliveryBody("webhook.test", new Date(), { message: `d-${i}` });
      const headers = signedHeaders([secret], `msg_${i}`, Math.floor(Date.now() / 1000), body);
      const response = await fetch(receiverUrl, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body,
      });
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: SLOTS }, sender));
  await done;
  return DELIVERIES / ((performance.now() - start) / 1000);
}

async function latencies(): Promise<{ outbox: number[]; job: number[] }> {
  let started: (at: number) => void = () => {};
  const probe = defineJob("bench.probe", z.object({}).passthrough(), () => started(performance.now()));
  const background = await startBackground(deps, {
    registry: createJobRegistry([probe]).add(deps, webhookJobs),
  });
  const outbox: number[] = [];
  const job: number[] = [];
  for (let i = 0; i < LATENCY_N; i++) {
    const marker = `l-${i}`;
    const seen = until(() => arrivals.has(marker));
    const tenantId = tenants[i % tenants.length] as string;
    await db.transaction((tx) =>
      emitEvent(tx, enqueueContext(deps), {
        tenantId,
        type: "webhook.test",
        data: { endpointId: endpointOf.get(tenantId) ?? "", message: marker },
      }),
    );
    const committed = performance.now();
    await seen;
    outbox.push((arrivals.get(marker) as number) - committed);

    const ran = new Promise<number>((resolve) => (started = resolve));
    await enqueue(db, enqueueContext(deps), probe, {});
    const enqueued = performance.now();
    job.push((await ran) - enqueued);
  }
  await background.stop(5_000);
  return { outbox, job };
}

const plinth: number[] = [];
const direct: number[] = [];
const noops: number[] = [];
for (let run = 0; run < RUNS; run++) {
  direct.push(await directThroughput());
  noops.push(await noopThroughput());
  plinth.push(await plinthThroughput(run));
  log(
    `run ${run + 1}: Plinth ${plinth.at(-1)?.toFixed(0)} deliveries/s, no-op jobs ${noops.at(-1)?.toFixed(0)}/s, direct POSTs ${direct.at(-1)?.toFixed(0)}/s`,
  );
}
const { outbox, job } = await latencies();
const fmt = (n: number) => n.toFixed(1);
console.log(
  JSON.stringify(
    {
      deliveries: DELIVERIES,
      tenants: TENANTS,
      slots: SLOTS,
      plinthDeliveriesPerSecond: plinth.map(Math.round),
      directPostsPerSecond: direct.map(Math.round),
      noopJobsPerSecond: noops.map(Math.round),
      deliveriesPerNoopJob: Number((median(plinth) / median(noops)).toFixed(2)),
      deliveriesPerDirectPost: Number((median(plinth) / median(direct)).toFixed(3)),
      loadAverage: loadavg().map((n) => Number(n.toFixed(2))),
      outboxCommitToReceiptMs: {
        p50: fmt(percentile(outbox, 50)),
        p99: fmt(percentile(outbox, 99)),
        n: outbox.length,
      },
      plainJobEnqueueToStartMs: {
        p50: fmt(percentile(job, 50)),
        p99: fmt(percentile(job, 99)),
        n: job.length,
      },
    },
    null,
    2,
  ),
);
await closeDeps(deps);
receiver.stop(true);
