/**
 * Scaling benchmark (docs/scaling.md): the same work on the single topology and on the scaled one,
 * in interleaved rounds of one run, printed side by side with ratios.
 *
 * 1. Jobs: three job loops (each with its own connection pool, as three API processes have) drain
 *    `--jobs` no-op jobs, all through PgBouncer in transaction mode (127.0.0.1:6432, with the direct
 *    connection for LISTEN) against straight to PostgreSQL (127.0.0.1:5432); then the NOTIFY wake-up
 *    latency (enqueue → handler start) of `--latency` sequential jobs, loops idle, both ways.
 * 2. Rate-limit decisions per second through the cache counter store: the GCRA limit (one key per
 *    client, as the global and auth limits) and the password windows (account, account + address,
 *    address: three slots on a cluster), `--decisions` each at `--concurrency` in flight over many
 *    clients, on the Redis Cluster (127.0.0.1:7000-7005) against one Redis (127.0.0.1:6379).
 *
 *   bun run bench:scale [--rounds 3] [--jobs 10000] [--latency 200] [--decisions 20000] [--concurrency 64]
 *
 * Needs what `sh scripts/setup.sh --services` starts. Prints one table; copy it into
 * docs/performance.md and docs/scaling.md.
 */
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { z } from "zod";
import { type Cache, createCache } from "../src/cache/index.ts";
import { systemClock } from "../src/clock.ts";
import { type Database, execute, openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrator.ts";
import { enqueue, enqueueMany } from "../src/jobs/enqueue.ts";
import { createJobLoop, type JobLoop } from "../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob, systemNoop } from "../src/jobs/registry.ts";
import { createRedactor } from "../src/redact.ts";
import { cacheCounterStore } from "../src/security/counter-store.ts";
import { createLogger } from "../src/telemetry/logger.ts";
import { median, percentile } from "./stats.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    jobs: { type: "string", default: "10000" },
    latency: { type: "string", default: "200" },
    decisions: { type: "string", default: "20000" },
    concurrency: { type: "string", default: "64" },
    direct: { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
    pooler: { type: "string", default: "postgres://postgres@127.0.0.1:6432/postgres" },
    redis: { type: "string", default: "redis://127.0.0.1:6379" },
    cluster: { type: "string", default: "redis://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002?cluster=true" },
  },
});
const ROUNDS = Number(values.rounds);
const JOBS = Number(values.jobs);
const LATENCY_N = Number(values.latency);
const DECISIONS = Number(values.decisions);
const CONCURRENCY = Number(values.concurrency);
const LOOPS = 3;
const DB_NAME = `bench_scale_${process.pid}`;
const urlOn = (base: string) => {
  const u = new URL(base);
  u.pathname = `/${DB_NAME}`;
  return u.toString();
};
const log = (message: string) => process.stderr.write(`${message}\n`);
const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: (l) => process.stderr.write(`${l}\n`) });

// ---------- jobs ----------

type Topology = "direct" | "pgbouncer";

function open(topology: Topology, poolSize: number): Promise<Database> {
  return topology === "direct"
    ? openDatabase(urlOn(values.direct), { poolSize })
    : openDatabase(urlOn(values.pooler), {
        poolSize,
        poolMode: "transaction",
        directUrl: urlOn(values.direct),
      });
}

function loop(database: Database, registry = createJobRegistry(), onEvent?: (type: string) => void): JobLoop {
  // the production defaults: 4 slots, batches of 5, a 2 s poll
  return createJobLoop(
    { database, clock: systemClock, logger, redactor },
    {
      registry,
      parallelism: 4,
      batchSize: 5,
      pollMs: 2_000,
      onEvent: onEvent ? (e) => onEvent(e.type) : undefined,
    },
  );
}

async function drain(topology: Topology, admin: Database): Promise<number> {
  await execute(admin.db, sql`truncate background_jobs`);
  await enqueueMany(
    admin.db,
    { clock: systemClock },
    Array.from({ length: JOBS }, () => ({ job: systemNoop, payload: {} })),
  );
  await execute(admin.db, sql`analyze background_jobs`);
  const databases = await Promise.all(Array.from({ length: LOOPS }, () => open(topology, 4)));
  let done = 0;
  let finish: () => void = () => {};
  const finished = new Promise<void>((r) => (finish = r));
  const loops = databases.map((database) =>
    loop(database, createJobRegistry(), (type) => {
      if (type === "succeeded" && ++done === JOBS) finish();
    }),
  );
  const start = performance.now();
  await Promise.all(loops.map((l) => l.start()));
  await finished;
  const seconds = (performance.now() - start) / 1000;
  await Promise.all(loops.map((l) => l.stop(5_000)));
  await Promise.all(databases.map((d) => d.close()));
  const [dupes] = await execute<{ n: number }>(
    admin.db,
    sql`select count(*)::int as n from background_jobs where attempts <> 1 or status <> 'succeeded'`,
  );
  if ((dupes?.n ?? 0) > 0) throw new Error(`${dupes?.n} jobs ran more than once or did not succeed`);
  return JOBS / seconds;
}

async function wakeUp(topology: Topology, admin: Database): Promise<number[]> {
  const databases = await Promise.all(Array.from({ length: LOOPS }, () => open(topology, 4)));
  let started: (at: number) => void = () => {};
  const job = defineJob("bench.wake", z.object({ i: z.number() }), () => started(performance.now()));
  const loops = databases.map((database) => loop(database, createJobRegistry([job])));
  await Promise.all(loops.map((l) => l.start()));
  if (!loops.every((l) => l.listening)) throw new Error("LISTEN failed: the figure would be poll-bound");
  await Bun.sleep(300);
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_N; i++) {
    const begun = new Promise<number>((r) => (started = r));
    const t0 = performance.now();
    await enqueue(admin.db, { clock: systemClock }, job, { i });
    samples.push((await begun) - t0);
  }
  await Promise.all(loops.map((l) => l.stop(5_000)));
  await Promise.all(databases.map((d) => d.close()));
  return samples;
}

// ---------- rate-limit decisions ----------

type CacheTopology = "one node" | "cluster";

async function openCache(topology: CacheTopology): Promise<Cache> {
  const cache = createCache(topology === "cluster" ? values.cluster : values.redis, {
    environment: "Development",
    logger,
    prefix: `plinth:bench-scale-${process.pid}:`,
  });
  if (!(await cache.waitReady(5_000))) throw new Error(`no ${topology} cache`);
  return cache;
}

async function decisionsPerSecond(cache: Cache, kind: "gcra" | "windows", round: number): Promise<number> {
  const store = cacheCounterStore(cache);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= DECISIONS) return;
      const client = `${round}-${i % 5_000}`;
      if (kind === "gcra") await store.rate(`rl:auth:{10.${client}}`, 1_000_000, 60_000, Date.now(), 1);
      else
        await store.window(
          "consume",
          [
            { key: `win:password:account:{a${client}}`, limit: 1_000_000, windowMs: 60_000 },
            { key: `win:password:account-ip:{ai${client}}`, limit: 1_000_000, windowMs: 60_000 },
            { key: `win:password:ip:{i${client}}`, limit: 1_000_000, windowMs: 60_000 },
          ],
          Date.now(),
        );
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return DECISIONS / ((performance.now() - start) / 1000);
}

async function cleanup(cache: Cache) {
  // the bench's keys expire in a minute; the one-node Redis is cleaned at once
  if (!cache.cluster) {
    let cursor = "0";
    const raw = (await import("ioredis")).Redis;
    const client = new raw(values.redis);
    do {
      const [c, keys] = await client.scan(cursor, "MATCH", `${cache.prefix}*`, "COUNT", 1000);
      cursor = c;
      if (keys.length > 0) await client.del(...keys);
    } while (cursor !== "0");
    client.disconnect();
  }
}

// ---------- run ----------

const admin0 = postgres(values.direct, { max: 1, onnotice: () => {} });
await admin0.unsafe(`drop database if exists "${DB_NAME}" with (force)`);
await admin0.unsafe(`create database "${DB_NAME}"`);
await admin0.end();
const admin = await openDatabase(urlOn(values.direct), { poolSize: 2 });
await migrate(admin.db);

const load: number[] = [];
const drained: Record<Topology, number[]> = { direct: [], pgbouncer: [] };
const wake: Record<Topology, number[]> = { direct: [], pgbouncer: [] };
const gcra: Record<CacheTopology, number[]> = { "one node": [], cluster: [] };
const windows: Record<CacheTopology, number[]> = { "one node": [], cluster: [] };
const caches = { "one node": await openCache("one node"), cluster: await openCache("cluster") };
try {
  for (let round = 0; round < ROUNDS; round++) {
    load.push(loadavg()[0] ?? 0);
    const order: Topology[] = round % 2 === 0 ? ["direct", "pgbouncer"] : ["pgbouncer", "direct"];
    for (const topology of order) {
      drained[topology].push(await drain(topology, admin));
      log(`round ${round + 1}: ${topology} drained ${Math.round(drained[topology].at(-1) ?? 0)} jobs/s`);
    }
    for (const topology of order) {
      wake[topology].push(...(await wakeUp(topology, admin)));
      log(`round ${round + 1}: ${topology} wake-up p50 ${median(wake[topology]).toFixed(1)} ms`);
    }
    const cacheOrder: CacheTopology[] = round % 2 === 0 ? ["one node", "cluster"] : ["cluster", "one node"];
    for (const topology of cacheOrder) {
      gcra[topology].push(await decisionsPerSecond(caches[topology], "gcra", round));
      windows[topology].push(await decisionsPerSecond(caches[topology], "windows", round));
      log(
        `round ${round + 1}: ${topology} ${Math.round(gcra[topology].at(-1) ?? 0)} limit decisions/s, ${Math.round(windows[topology].at(-1) ?? 0)} window decisions/s`,
      );
    }
  }
} finally {
  for (const cache of Object.values(caches)) {
    await cleanup(cache);
    await cache.close();
  }
  await admin.close();
  const admin1 = postgres(values.direct, { max: 1, onnotice: () => {} });
  await admin1.unsafe(`drop database if exists "${DB_NAME}" with (force)`);
  await admin1.end();
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
const rows: string[][] = [
  [
    `jobs drained, ${LOOPS} loops × 4 slots (jobs/s, median)`,
    fmt(median(drained.direct)),
    fmt(median(drained.pgbouncer)),
    ratio(median(drained.pgbouncer), median(drained.direct)),
  ],
  [
    "NOTIFY wake-up p50 (ms)",
    median(wake.direct).toFixed(1),
    median(wake.pgbouncer).toFixed(1),
    ratio(median(wake.pgbouncer), median(wake.direct)),
  ],
  [
    "NOTIFY wake-up p95 (ms)",
    percentile(wake.direct, 95).toFixed(1),
    percentile(wake.pgbouncer, 95).toFixed(1),
    ratio(percentile(wake.pgbouncer, 95), percentile(wake.direct, 95)),
  ],
  [
    `rate-limit decisions/s (GCRA, ${CONCURRENCY} in flight, median)`,
    fmt(median(gcra["one node"])),
    fmt(median(gcra.cluster)),
    ratio(median(gcra.cluster), median(gcra["one node"])),
  ],
  [
    "password-window decisions/s (3 windows, median)",
    fmt(median(windows["one node"])),
    fmt(median(windows.cluster)),
    ratio(median(windows.cluster), median(windows["one node"])),
  ],
];
console.log(
  `\n${ROUNDS} interleaved rounds, ${new Date().toISOString()}, load average ${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)}\n`,
);
console.log(
  "| measure | single (PostgreSQL / one Redis) | scaled (PgBouncer / Redis Cluster) | scaled ÷ single |",
);
console.log("| --- | ---: | ---: | ---: |");
for (const row of rows) console.log(`| ${row.join(" | ")} |`);
