// graphile-worker 0.18 peer for bench/jobs.ts (runs under Node). Usage:
//   node graphile-worker.mjs throughput|latency|idle <databaseUrl> <n> <slots>
// Prints one JSON line with the result (idle: prints {"ready":true} and runs until killed).
import { Logger, makeWorkerUtils, run } from "graphile-worker";

const [mode, connectionString, nArg, slotsArg] = process.argv.slice(2);
const n = Number(nArg);
const concurrency = Number(slotsArg ?? 4);
const logger = new Logger(() => (level, message) => {
  if (level === "error") console.error(message);
});

const utils = await makeWorkerUtils({ connectionString, logger });
await utils.migrate();

if (mode === "throughput") {
  await utils.withPgClient((c) => c.query("delete from graphile_worker._private_jobs"));
  await utils.withPgClient((c) =>
    c.query(
      `select graphile_worker.add_jobs(array(
         select json_populate_record(null::graphile_worker.job_spec, json_build_object('identifier', 'noop', 'payload', '{}'::json))
         from generate_series(1, $1)))`,
      [n],
    ),
  );
  let count = 0;
  let done;
  const finished = new Promise((r) => (done = r));
  const start = performance.now();
  const runner = await run({
    connectionString,
    concurrency,
    pollInterval: 2000,
    noHandleSignals: true,
    logger,
    taskList: {
      noop: async () => {
        if (++count === n) done();
      },
    },
  });
  await finished;
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
    logger,
    taskList: { noop: async () => {} },
  });
  console.log(JSON.stringify({ ready: true }));
  await new Promise((resolve) => process.on("SIGTERM", resolve));
  await runner.stop();
}
await utils.release();
process.exit(0);
