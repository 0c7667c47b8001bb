// graphile-worker 0.18 peer for bench/jobs.ts (runs under Node). Usage:
//   node graphile-worker.mjs throughput|latency|idle|priority <databaseUrl> <n> <slots> [tuned|defaults]
// Prints one JSON line with the result (idle: prints {"ready":true} and runs until killed).
// `tuned` (the default) is the configuration of graphile-worker's performance page
// (https://worker.graphile.org/docs/performance): a local queue of 500 jobs fetched and locked in
// one query, and batched completions (completeJobBatchDelay / failJobBatchDelay 0). `defaults`
// fetches one job per worker per query and completes each on its own.
import { Logger, makeWorkerUtils, run } from "graphile-worker";

const [mode, connectionString, nArg, slotsArg, tuning = "tuned"] = process.argv.slice(2);
const n = Number(nArg);
const concurrency = Number(slotsArg ?? 4);
const preset =
  tuning === "tuned"
    ? { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } }
    : { worker: {} };
/** As in bench/jobs.ts: the probe is added once this many of the backlog have run. */
const BACKLOG_HEAD = 2_000;
const logger = new Logger(() => (level, message) => {
  if (level === "error") console.error(message);
});

const utils = await makeWorkerUtils({ connectionString, logger });
await utils.migrate();

async function addBacklog() {
  await utils.withPgClient((c) => c.query("delete from graphile_worker._private_jobs"));
  await utils.withPgClient((c) =>
    c.query(
      `select graphile_worker.add_jobs(array(
         select json_populate_record(null::graphile_worker.job_spec, json_build_object('identifier', 'noop', 'payload', '{}'::json))
         from generate_series(1, $1)))`,
      [n],
    ),
  );
  await utils.withPgClient((c) => c.query("analyze graphile_worker._private_jobs"));
}

if (mode === "priority") {
  // a backlog of n jobs at the default priority 0; once BACKLOG_HEAD ran, one job with priority
  // -10 (graphile-worker runs numerically smaller priorities first): enqueue → start
  await addBacklog();
  let ran = 0;
  let headReached;
  const head = new Promise((r) => (headReached = r));
  let probeStarted;
  const probe = new Promise((r) => (probeStarted = r));
  const runner = await run({
    connectionString,
    concurrency,
    pollInterval: 2000,
    noHandleSignals: true,
    preset,
    logger,
    taskList: {
      noop: async (payload) => {
        if (payload.probe) probeStarted(performance.now());
        else if (++ran === BACKLOG_HEAD) headReached();
      },
    },
  });
  await head;
  const t0 = performance.now();
  await utils.addJob("noop", { probe: true }, { priority: -10 });
  const ms = (await probe) - t0;
  await runner.stop();
  console.log(JSON.stringify({ ms }));
} else if (mode === "throughput") {
  // statistics as autovacuum would have them a minute later (all three peers get the same)
  await addBacklog();
  let count = 0;
  let done;
  const finished = new Promise((r) => (done = r));
  const start = performance.now();
  const runner = await run({
    connectionString,
    concurrency,
    pollInterval: 2000,
    noHandleSignals: true,
    preset,
    logger,
    taskList: {
      noop: async () => {
        if (++count === n) done();
      },
    },
  });
  await finished;
  // as Plinth's drain, until every run is recorded: graphile-worker deletes a job when it records
  // its completion (batched), so the table is empty then
  for (;;) {
    const { rows } = await utils.withPgClient((c) =>
      c.query("select exists (select 1 from graphile_worker._private_jobs) as left"),
    );
    if (!rows[0].left) break;
  }
  const seconds = (performance.now() - start) / 1000;
  await runner.stop();
  console.log(JSON.stringify({ jobsPerSecond: n / seconds, seconds }));
} else if (mode === "latency") {
  let resolveStart;
  const runner = await run({
    connectionString,
    concurrency,
    pollInterval: 2000,
    noHandleSignals: true,
    preset,
    logger,
    taskList: {
      lat: async () => {
        resolveStart(performance.now());
      },
    },
  });
  await new Promise((r) => setTimeout(r, 500));
  const samples = [];
  for (let i = 0; i < n; i++) {
    const started = new Promise((r) => (resolveStart = r));
    const t0 = performance.now();
    await utils.addJob("lat", { i });
    samples.push((await started) - t0);
  }
  await runner.stop();
  console.log(JSON.stringify({ samples }));
} else if (mode === "idle") {
  const runner = await run({
    connectionString,
    concurrency,
    pollInterval: 2000,
    noHandleSignals: true,
    preset,
    logger,
    taskList: { noop: async () => {} },
  });
  console.log(JSON.stringify({ ready: true }));
  await new Promise((resolve) => process.on("SIGTERM", resolve));
  await runner.stop();
}
await utils.release();
process.exit(0);
