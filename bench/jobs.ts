// Job-queue benchmark: Plinth's job loop vs graphile-worker 0.18 and pg-boss 10.4.2 on the same
// local PostgreSQL, each in its own database, all with 4 worker slots.
//   bun run bench:jobs [--runs 3] [--jobs 20000] [--latency 1000] [--pgboss-latency 100] [--idle 10]
//                      [--groups 100] [--finished 1000000] [--pgboss-batch 50]
//                      [--local-queue 500] [--only plinth,plinth-queue,graphile,graphile-default,pgboss,flow,rate]
//                      [--flow-width 10000] [--rate-jobs 1500] [--rate-limit 100] [--rate-loops 3]
//                      [--database postgres://postgres@127.0.0.1:5432/postgres]
// Besides drain, latency and idle load: Plinth's drain with `--groups` tenants' jobs and with
// `--finished` finished rows in the table, the time to start of one small tenant's job behind a
// backlog (with and without groups), and of a high-priority job behind a backlog (all contenders).
// `plinth-queue` is Plinth tuned for throughput like graphile-worker's local queue:
// `BackgroundProcessing:JobLocalQueueSize` = `--local-queue`.
// `flow`: a fan-out/fan-in flow of `--flow-width` jobs (one root, its children, one sink) beside a
// plain drain of as many; `rate`: `--rate-jobs` jobs of one key at `--rate-limit`/s drained by
// `--rate-loops` loops, the measured rate against the configured one (bench/jobs-flows.ts).
// Peers run under Node (`node bench/peers/*.mjs`), as they are made for it; Plinth runs under Bun.
import { loadavg as loadavgOf } from "node:os";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { z } from "zod";
import { systemClock } from "../src/clock.ts";
import { type Database, execute, openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrator.ts";
import { enqueue, enqueueMany } from "../src/jobs/enqueue.ts";
import { createJobLoop, type JobLoop } from "../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob, systemNoop } from "../src/jobs/registry.ts";
import { createRedactor } from "../src/redact.ts";
import { createLogger } from "../src/telemetry/logger.ts";
import { flowRun, rateRun } from "./jobs-flows.ts";
import { startQueryCounter } from "./query-counter.ts";
import { median, percentile } from "./stats.ts";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    jobs: { type: "string", default: "20000" },
    latency: { type: "string", default: "1000" },
    "pgboss-latency": { type: "string", default: "100" },
    idle: { type: "string", default: "10" },
    only: { type: "string", default: "plinth,plinth-queue,graphile,graphile-default,pgboss" },
    "local-queue": { type: "string", default: "500" },
    groups: { type: "string", default: "100" },
    finished: { type: "string", default: "1000000" },
    "pgboss-batch": { type: "string", default: "50" },
    database: { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
    "flow-width": { type: "string", default: "10000" },
    "rate-jobs": { type: "string", default: "1500" },
    "rate-limit": { type: "string", default: "100" },
    "rate-loops": { type: "string", default: "3" },
  },
});
const RUNS = Number(args.runs);
const JOBS = Number(args.jobs);
const LATENCY_N = Number(args.latency);
const PGBOSS_LATENCY_N = Number(args["pgboss-latency"]);
const IDLE_SECONDS = Number(args.idle);
const ONLY = new Set(args.only.split(","));
const GROUPS = Number(args.groups);
const FINISHED = Number(args.finished);
const PGBOSS_BATCH = args["pgboss-batch"];
const LOCAL_QUEUE = Number(args["local-queue"]);
/** A job behind a backlog is enqueued once this many of the backlog have run (the loop is busy). */
const BACKLOG_HEAD = 2_000;
if (!(JOBS >= BACKLOG_HEAD * 2)) {
  // the priority and fairness runs enqueue their probe once BACKLOG_HEAD of the backlog ran
  console.error(
    `--jobs must be at least ${BACKLOG_HEAD * 2} (the backlog runs wait for ${BACKLOG_HEAD} to run)`,
  );
  process.exit(64);
}
const SLOTS = 4;
const SERVER = new URL(args.database);
// databases of this run only (another bench on the same server must not drop them), dropped at the end
const DB = {
  plinth: `bench_plinth_${process.pid}`,
  graphile: `bench_graphile_${process.pid}`,
  pgboss: `bench_pgboss_${process.pid}`,
};

const urlOf = (name: string, port?: number) => {
  const u = new URL(SERVER);
  u.pathname = `/${name}`;
  if (port) {
    u.hostname = "127.0.0.1";
    u.port = String(port);
  }
  return u.toString();
};

async function recreate(name: string): Promise<string> {
  const admin = postgres(SERVER.toString(), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`drop database if exists "${name}" with (force)`);
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  return urlOf(name);
}

const log = (message: string) => process.stderr.write(`${message}\n`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

interface PeerResult {
  throughput: number[];
  latency: number[];
  idleQps: number;
  /** Enqueue → start of a high-priority job behind a backlog, ms, one per run. */
  priority: number[];
}

// ---------- Plinth ----------

const redactor = createRedactor([]);
const quiet = createLogger({ level: "error", redactor, write: (l) => process.stderr.write(`${l}\n`) });

function plinthLoop(
  database: Database,
  registry = createJobRegistry(),
  onEvent?: Parameters<typeof createJobLoop>[1]["onEvent"],
  localQueue = 0,
): JobLoop {
  // the production defaults: 4 slots, batches of 5, a 2 s poll, no local queue (unless tuned)
  return createJobLoop(
    { database, clock: systemClock, logger: quiet, redactor },
    { registry, parallelism: SLOTS, batchSize: 5, pollMs: 2_000, onEvent, localQueue },
  );
}

async function plinthDatabase(): Promise<string> {
  const url = await recreate(DB.plinth);
  const database = await openDatabase(url, { poolSize: 2 });
  await migrate(database.db);
  await database.close();
  return url;
}

async function plinthThroughput(
  shape: { groups?: number; finished?: number; localQueue?: number } = {},
): Promise<number> {
  const url = await plinthDatabase();
  const database = await openDatabase(url, { poolSize: 10 });
  if (shape.finished)
    await execute(
      database.db,
      sql`insert into background_jobs (kind, status, attempts, run_after, created_at, updated_at, finished_at)
          select 'system.noop', case when g % 100 = 0 then 'dead' else 'succeeded' end, 1,
                 now() - interval '1 day', now() - interval '1 day', now(), now() - interval '1 hour'
          from generate_series(1, ${shape.finished}) g`,
    );
  const groups = shape.groups ?? 0;
  await enqueueMany(
    database.db,
    { clock: systemClock },
    Array.from({ length: JOBS }, (_, i) => ({
      job: systemNoop,
      payload: {},
      options: groups > 0 ? { tenantId: `tenant-${i % groups}` } : {},
    })),
  );
  await execute(database.db, sql`analyze background_jobs`);
  let done = 0;
  let finish: () => void = () => {};
  const finished = new Promise<void>((r) => (finish = r));
  const loop = plinthLoop(
    database,
    createJobRegistry(),
    (e) => {
      if (e.type === "succeeded" && ++done === JOBS) finish();
    },
    shape.localQueue,
  );
  const start = performance.now();
  await loop.start();
  await finished; // every run recorded as succeeded in the database, not only started
  const seconds = (performance.now() - start) / 1000;
  await loop.stop(5_000);
  await database.close();
  return JOBS / seconds;
}

async function plinthLatency(localQueue = 0): Promise<number[]> {
  const url = await plinthDatabase();
  const database = await openDatabase(url, { poolSize: 10 });
  let started: (at: number) => void = () => {};
  const lat = defineJob("bench.latency", z.object({ i: z.number() }), () => started(performance.now()));
  const loop = plinthLoop(database, createJobRegistry([lat]), undefined, localQueue);
  await loop.start();
  if (!loop.listening) throw new Error("LISTEN failed: the latency figure would be poll-bound");
  await Bun.sleep(500);
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_N; i++) {
    const begun = new Promise<number>((r) => (started = r));
    const t0 = performance.now();
    await enqueue(database.db, { clock: systemClock }, lat, { i });
    samples.push((await begun) - t0);
  }
  await loop.stop(5_000);
  await database.close();
  return samples;
}

/**
 * Time from enqueueing one job to its start while the loop drains a backlog of `JOBS` no-op jobs
 * (enqueued once `BACKLOG_HEAD` of them ran). `fair`: the backlog is one tenant's and the job
 * another tenant's; `plain`: neither has a group; `priority`: the job has priority 10.
 */
async function plinthBehindBacklog(mode: "fair" | "plain" | "priority", localQueue = 0): Promise<number> {
  const url = await plinthDatabase();
  const database = await openDatabase(url, { poolSize: 10 });
  let started = 0;
  let ran = 0;
  let headReached: () => void = () => {};
  const head = new Promise<void>((r) => (headReached = r));
  const job = defineJob("bench.backlog", z.object({ probe: z.boolean() }), (p) => {
    if (p.probe) started = performance.now();
    else if (++ran === BACKLOG_HEAD) headReached();
  });
  await enqueueMany(
    database.db,
    { clock: systemClock },
    Array.from({ length: JOBS }, () => ({
      job,
      payload: { probe: false },
      options: mode === "fair" ? { tenantId: "big-tenant" } : {},
    })),
  );
  await execute(database.db, sql`analyze background_jobs`);
  const loop = plinthLoop(database, createJobRegistry([job]), undefined, localQueue);
  await loop.start();
  await head;
  const t0 = performance.now();
  await enqueue(
    database.db,
    { clock: systemClock },
    job,
    { probe: true },
    mode === "fair" ? { tenantId: "small-tenant" } : mode === "priority" ? { priority: 10 } : {},
  );
  while (started === 0) await Bun.sleep(1);
  const ms = started - t0;
  await loop.stop(5_000);
  await database.close();
  return ms;
}

async function measureIdle(
  start: (url: string) => Promise<() => Promise<void>>,
  dbName: string,
): Promise<number> {
  const counter = await startQueryCounter({ host: SERVER.hostname, port: Number(SERVER.port || 5432) });
  try {
    const stop = await start(urlOf(dbName, counter.port));
    await Bun.sleep(2_000); // start-up queries settle
    const before = counter.count();
    await Bun.sleep(IDLE_SECONDS * 1000);
    const qps = (counter.count() - before) / IDLE_SECONDS;
    await stop();
    return qps;
  } finally {
    counter.close();
  }
}

async function plinthIdle(localQueue = 0): Promise<number> {
  await plinthDatabase();
  return measureIdle(async (url) => {
    const database = await openDatabase(url, { poolSize: 10 });
    const loop = plinthLoop(database, undefined, undefined, localQueue);
    await loop.start();
    return async () => {
      await loop.stop(5_000);
      await database.close();
    };
  }, DB.plinth);
}

// ---------- peers (Node child processes) ----------

async function node(script: string, argv: string[]): Promise<Record<string, unknown>> {
  const proc = Bun.spawn(["node", `bench/peers/${script}`, ...argv], { stdout: "pipe", stderr: "inherit" });
  const out = await new Response(proc.stdout).text();
  const code = await proc.exited;
  const last = out.trim().split("\n").at(-1);
  if (code !== 0 || !last) throw new Error(`${script} ${argv[0]} failed (exit ${code})`);
  return JSON.parse(last);
}

async function nodeIdle(script: string, dbName: string, extra: string[] = []): Promise<number> {
  return measureIdle(async (url) => {
    const proc = Bun.spawn(["node", `bench/peers/${script}`, "idle", url, "0", String(SLOTS), ...extra], {
      stdout: "pipe",
      stderr: "inherit",
    });
    const reader = proc.stdout.getReader();
    let text = "";
    while (!text.includes('"ready":true')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`${script} idle exited early`);
      text += new TextDecoder().decode(value);
    }
    return async () => {
      proc.kill("SIGTERM");
      await proc.exited;
    };
  }, dbName);
}

async function peerThroughput(script: string, dbName: string, extra: string[] = []): Promise<number> {
  const url = await recreate(dbName);
  return (await node(script, ["throughput", url, String(JOBS), String(SLOTS), ...extra]))
    .jobsPerSecond as number;
}

async function peerPriority(script: string, dbName: string, extra: string[] = []): Promise<number> {
  const url = await recreate(dbName);
  return (await node(script, ["priority", url, String(JOBS), String(SLOTS), ...extra])).ms as number;
}

async function peerLatency(
  script: string,
  dbName: string,
  n: number,
  extra: string[] = [],
): Promise<number[]> {
  const url = await recreate(dbName);
  return (await node(script, ["latency", url, String(n), String(SLOTS), ...extra])).samples as number[];
}

// ---------- main ----------

interface Contender {
  name: string;
  throughput(): Promise<number>;
  latency(): Promise<number[]>;
  idle(): Promise<number>;
  priority(): Promise<number>;
}
const contenders: Contender[] = [];
if (ONLY.has("plinth"))
  contenders.push({
    name: "Plinth",
    throughput: () => plinthThroughput(),
    latency: plinthLatency,
    idle: plinthIdle,
    priority: () => plinthBehindBacklog("priority"),
  });
const PLINTH_QUEUE = `Plinth (local queue ${LOCAL_QUEUE})`;
if (ONLY.has("plinth-queue"))
  contenders.push({
    name: PLINTH_QUEUE,
    throughput: () => plinthThroughput({ localQueue: LOCAL_QUEUE }),
    latency: () => plinthLatency(LOCAL_QUEUE),
    idle: () => plinthIdle(LOCAL_QUEUE),
    priority: () => plinthBehindBacklog("priority", LOCAL_QUEUE),
  });
// graphile-worker as its performance page configures it for throughput (local queue of 500,
// batched completions), and with its defaults
for (const [key, name, tuning] of [
  ["graphile", "graphile-worker 0.18 (tuned)", "tuned"],
  ["graphile-default", "graphile-worker 0.18 (defaults)", "defaults"],
] as const)
  if (ONLY.has(key))
    contenders.push({
      name,
      throughput: () => peerThroughput("graphile-worker.mjs", DB.graphile, [tuning]),
      latency: () => peerLatency("graphile-worker.mjs", DB.graphile, LATENCY_N, [tuning]),
      idle: () => nodeIdle("graphile-worker.mjs", DB.graphile, [tuning]),
      priority: () => peerPriority("graphile-worker.mjs", DB.graphile, [tuning]),
    });
if (ONLY.has("pgboss"))
  contenders.push({
    name: "pg-boss 10.4.2",
    throughput: () => peerThroughput("pg-boss.mjs", DB.pgboss, [PGBOSS_BATCH]),
    latency: () => peerLatency("pg-boss.mjs", DB.pgboss, PGBOSS_LATENCY_N, [PGBOSS_BATCH]),
    idle: () => nodeIdle("pg-boss.mjs", DB.pgboss, [PGBOSS_BATCH]),
    priority: () => peerPriority("pg-boss.mjs", DB.pgboss, [PGBOSS_BATCH]),
  });

const loadavg = () =>
  loadavgOf()
    .map((x) => x.toFixed(2))
    .join(" ");
const loadBefore = loadavg();
const results: Record<string, PeerResult> = {};
for (const c of contenders) results[c.name] = { throughput: [], latency: [], idleQps: 0, priority: [] };
/** Plinth only: drain with groups and with finished rows; time to start behind a backlog. */
const plinthShapes = {
  grouped: [] as number[],
  queueGrouped: [] as number[],
  queueFair: [] as number[],
  finished: [] as number[],
  fair: [] as number[],
  plain: [] as number[],
};
const resultOf = (c: Contender) => results[c.name] as PeerResult;
// runs interleaved (A B C, A B C, …) so a change in the machine's load hits every contender alike
for (let r = 0; r < RUNS; r++) {
  for (const c of contenders) {
    const jobsPerSecond = await c.throughput();
    resultOf(c).throughput.push(jobsPerSecond);
    log(`drain run ${r + 1}, ${c.name}: ${Math.round(jobsPerSecond)} jobs/s`);
    if (c.name === "Plinth") {
      const grouped = await plinthThroughput({ groups: GROUPS });
      plinthShapes.grouped.push(grouped);
      log(`drain run ${r + 1}, Plinth with ${GROUPS} groups: ${Math.round(grouped)} jobs/s`);
      const finished = await plinthThroughput({ finished: FINISHED });
      plinthShapes.finished.push(finished);
      log(`drain run ${r + 1}, Plinth with ${fmt(FINISHED)} finished rows: ${Math.round(finished)} jobs/s`);
    }
    if (c.name === PLINTH_QUEUE) {
      const grouped = await plinthThroughput({ groups: GROUPS, localQueue: LOCAL_QUEUE });
      plinthShapes.queueGrouped.push(grouped);
      log(`drain run ${r + 1}, ${PLINTH_QUEUE} with ${GROUPS} groups: ${Math.round(grouped)} jobs/s`);
    }
  }
}
for (let r = 0; r < RUNS; r++) {
  for (const c of contenders) {
    const ms = await c.priority();
    resultOf(c).priority.push(ms);
    log(`priority run ${r + 1}, ${c.name}: ${ms.toFixed(1)} ms`);
  }
  if (ONLY.has("plinth")) {
    plinthShapes.fair.push(await plinthBehindBacklog("fair"));
    plinthShapes.plain.push(await plinthBehindBacklog("plain"));
    log(
      `fairness run ${r + 1}: with groups ${plinthShapes.fair.at(-1)?.toFixed(1)} ms, without ${plinthShapes.plain.at(-1)?.toFixed(1)} ms`,
    );
  }
  if (ONLY.has("plinth-queue")) {
    plinthShapes.queueFair.push(await plinthBehindBacklog("fair", LOCAL_QUEUE));
    log(
      `fairness run ${r + 1}, ${PLINTH_QUEUE}: with groups ${plinthShapes.queueFair.at(-1)?.toFixed(1)} ms`,
    );
  }
}
for (const c of contenders) {
  resultOf(c).latency = await c.latency();
  log(`latency, ${c.name}: p50 ${percentile(resultOf(c).latency, 50).toFixed(1)} ms`);
}
for (const c of contenders) {
  resultOf(c).idleQps = await c.idle();
  log(`idle, ${c.name}: ${resultOf(c).idleQps.toFixed(1)} statements/s`);
}

const flows: { flow: number; plain: number }[] = [];
const rates: { rate: number; seconds: number }[] = [];
for (let r = 0; r < RUNS; r++) {
  if (ONLY.has("flow")) {
    flows.push(await flowRun(plinthDatabase, Number(args["flow-width"])));
    log(
      `flow run ${r + 1}: ${Math.round(flows.at(-1)?.flow ?? 0)} jobs/s, plain ${Math.round(flows.at(-1)?.plain ?? 0)}`,
    );
  }
  if (ONLY.has("rate")) {
    const input = {
      jobs: Number(args["rate-jobs"]),
      limit: Number(args["rate-limit"]),
      loops: Number(args["rate-loops"]),
    };
    rates.push(await rateRun(plinthDatabase, input));
    log(`rate run ${r + 1}: ${fmt(rates.at(-1)?.rate ?? 0, 2)} jobs/s (limit ${input.limit})`);
  }
}
if (flows.length > 0 || rates.length > 0) {
  const width = fmt(Number(args["flow-width"]));
  const limit = Number(args["rate-limit"]);
  const lines = [
    `| Plinth flows and rate limits | median of ${RUNS} | runs | ratio |`,
    "| --- | --- | --- | --- |",
    ...(flows.length > 0
      ? [
          `| flow of ${width} jobs (1 → ${fmt(Number(args["flow-width"]) - 2)} → 1), jobs/s | ${fmt(median(flows.map((f) => f.flow)))} | ${flows.map((f) => fmt(f.flow)).join(" / ")} | ${fmt(median(flows.map((f) => f.flow / f.plain)), 2)}× the plain drain |`,
          `| plain drain of ${width} jobs, jobs/s | ${fmt(median(flows.map((f) => f.plain)))} | ${flows.map((f) => fmt(f.plain)).join(" / ")} | 1.00× |`,
        ]
      : []),
    ...(rates.length > 0
      ? [
          `| ${fmt(Number(args["rate-jobs"]))} jobs of one key at ${limit}/s, ${args["rate-loops"]} loops: measured jobs/s after the burst | ${fmt(median(rates.map((x) => x.rate)), 2)} | ${rates.map((x) => fmt(x.rate, 2)).join(" / ")} | ${fmt(median(rates.map((x) => x.rate)) / limit, 3)}× the limit (target within 2 %) |`,
        ]
      : []),
  ];
  process.stdout.write(`\n${lines.join("\n")}\n\n`);
}

const names = Object.keys(results);
const plinth = results.Plinth;
const plinthQueue = results[PLINTH_QUEUE];
const row = (label: string, cell: (r: PeerResult) => string) =>
  `| ${label} | ${names.map((n) => cell(results[n] as PeerResult)).join(" | ")} |`;
const lines = [
  `| ${SLOTS} worker slots | ${names.join(" | ")} |`,
  `| --- | ${names.map(() => "---").join(" | ")} |`,
  row(`drain ${fmt(JOBS)} no-op jobs, jobs/s (median of ${RUNS})`, (r) => fmt(median(r.throughput))),
  row("drain runs, jobs/s", (r) => r.throughput.map((x) => fmt(x)).join(" / ")),
  ...(plinth
    ? [row("Plinth drain ÷ this", (r) => `${fmt(median(plinth.throughput) / median(r.throughput), 2)}×`)]
    : []),
  ...(plinthQueue
    ? [
        row(
          `${PLINTH_QUEUE} drain ÷ this`,
          (r) => `${fmt(median(plinthQueue.throughput) / median(r.throughput), 2)}×`,
        ),
      ]
    : []),
  row("enqueue→start latency p50 / p95 / p99, ms", (r) =>
    [50, 95, 99].map((p) => fmt(percentile(r.latency, p), 1)).join(" / "),
  ),
  row("latency samples (sequential jobs)", (r) => fmt(r.latency.length)),
  ...(plinth
    ? [
        row(
          "this p50 ÷ Plinth p50",
          (r) => `${fmt(percentile(r.latency, 50) / percentile(plinth.latency, 50), 2)}×`,
        ),
      ]
    : []),
  row(`idle load, statements/s (over ${IDLE_SECONDS} s)`, (r) => fmt(r.idleQps, 1)),
  row(`high-priority job behind a ${fmt(JOBS)}-job backlog: enqueue→start, ms (median of ${RUNS})`, (r) =>
    fmt(median(r.priority), 1),
  ),
  row("priority runs, ms", (r) => r.priority.map((x) => fmt(x, 1)).join(" / ")),
];
if (names.length > 0) process.stdout.write(`\n${lines.join("\n")}\n\n`);
if (plinth) {
  const empty = median(plinth.throughput);
  const shapes = [
    `| Plinth only | median of ${RUNS} | runs | ratio |`,
    "| --- | --- | --- | --- |",
    `| drain ${fmt(JOBS)} jobs, no groups, jobs/s | ${fmt(empty)} | ${plinth.throughput.map((x) => fmt(x)).join(" / ")} | 1.00× |`,
    `| drain ${fmt(JOBS)} jobs over ${GROUPS} groups (tenants), jobs/s | ${fmt(median(plinthShapes.grouped))} | ${plinthShapes.grouped.map((x) => fmt(x)).join(" / ")} | ${fmt(median(plinthShapes.grouped) / empty, 2)}× (target ≥ 0.90×) |`,
    `| drain ${fmt(JOBS)} jobs beside ${fmt(FINISHED)} finished rows, jobs/s | ${fmt(median(plinthShapes.finished))} | ${plinthShapes.finished.map((x) => fmt(x)).join(" / ")} | ${fmt(median(plinthShapes.finished) / empty, 2)}× (target ≥ 0.80×) |`,
    `| small tenant's job behind another's ${fmt(JOBS)}-job backlog, with groups: enqueue→start, ms | ${fmt(median(plinthShapes.fair), 1)} | ${plinthShapes.fair.map((x) => fmt(x, 1)).join(" / ")} | target ≤ 500 ms |`,
    `| the same job without groups (it waits behind the backlog), ms | ${fmt(median(plinthShapes.plain), 1)} | ${plinthShapes.plain.map((x) => fmt(x, 1)).join(" / ")} | ${fmt(median(plinthShapes.plain) / median(plinthShapes.fair), 0)}× slower |`,
  ];
  process.stdout.write(`${shapes.join("\n")}\n\n`);
}
if (plinthQueue) {
  const empty = median(plinthQueue.throughput);
  const shapes = [
    `| ${PLINTH_QUEUE} | median of ${RUNS} | runs | ratio |`,
    "| --- | --- | --- | --- |",
    `| drain ${fmt(JOBS)} jobs, no groups, jobs/s | ${fmt(empty)} | ${plinthQueue.throughput.map((x) => fmt(x)).join(" / ")} | 1.00× |`,
    `| drain ${fmt(JOBS)} jobs over ${GROUPS} groups (tenants), jobs/s | ${fmt(median(plinthShapes.queueGrouped))} | ${plinthShapes.queueGrouped.map((x) => fmt(x)).join(" / ")} | ${fmt(median(plinthShapes.queueGrouped) / empty, 2)}× (target ≥ 0.90×) |`,
    `| small tenant's job behind another's ${fmt(JOBS)}-job backlog, with groups: enqueue→start, ms | ${fmt(median(plinthShapes.queueFair), 1)} | ${plinthShapes.queueFair.map((x) => fmt(x, 1)).join(" / ")} | target ≤ 500 ms |`,
  ];
  process.stdout.write(`${shapes.join("\n")}\n\n`);
}
process.stdout.write(
  `load average (1/5/15 min) before: ${loadBefore}, after: ${loadavg()}; machine: ${navigator.hardwareConcurrency} CPUs, PostgreSQL ${await postgres(SERVER.toString(), { max: 1 })`show server_version`.then((r) => r[0]?.server_version)}, Bun ${Bun.version}, ${(await Bun.$`node --version`.text()).trim()}\n`,
);
{
  const admin = postgres(SERVER.toString(), { max: 1, onnotice: () => {} });
  for (const name of Object.values(DB)) await admin.unsafe(`drop database if exists "${name}" with (force)`);
  await admin.end();
}
process.exit(0);
