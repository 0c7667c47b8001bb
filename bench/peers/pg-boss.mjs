// pg-boss 10.4.2 peer for bench/jobs.ts (runs under Node). Usage:
//   node pg-boss.mjs throughput|latency|idle|priority <databaseUrl> <n> <slots> [batchSize]
// `slots` workers (boss.work calls), each fetching `batchSize` jobs per poll (pg-boss's own batching)
// at the smallest poll interval pg-boss allows (0.5 s): pg-boss has no NOTIFY, so a worker waits a
// poll between fetches and drains at most slots × batchSize jobs per 0.5 s.
// Prints one JSON line with the result (idle: prints {"ready":true} and runs until SIGTERM).
import PgBoss from "pg-boss";

const [mode, connectionString, nArg, slotsArg, batchArg] = process.argv.slice(2);
const n = Number(nArg);
const slots = Number(slotsArg ?? 4);
const batchSize = Number(batchArg ?? 50);
const pollingIntervalSeconds = 0.5; // the smallest pg-boss allows

const boss = new PgBoss({ connectionString, max: 10 });
boss.on("error", (e) => console.error(e));
await boss.start();
await boss.createQueue("noop");
await boss.createQueue("lat");

/** As in bench/jobs.ts: the probe is sent once this many of the backlog have run. */
const BACKLOG_HEAD = 2_000;

async function addBacklog() {
  await boss.deleteAllQueues?.().catch(() => {});
  await boss.createQueue("noop");
  for (let i = 0; i < n; i += 1000)
    await boss.insert(Array.from({ length: Math.min(1000, n - i) }, () => ({ name: "noop", data: {} })));
  await boss.getDb().executeSql("analyze pgboss.job");
}

if (mode === "priority") {
  // a backlog of n jobs at priority 0; once BACKLOG_HEAD ran, one with priority 10 (higher first,
  // `priority: true` in work(), the default): send → start
  await addBacklog();
  let ran = 0;
  let headReached;
  const head = new Promise((r) => (headReached = r));
  let probeStarted;
  const probe = new Promise((r) => (probeStarted = r));
  for (let w = 0; w < slots; w++)
    await boss.work("noop", { batchSize, pollingIntervalSeconds, priority: true }, async (jobs) => {
      for (const job of jobs) {
        if (job.data?.probe) probeStarted(performance.now());
        else if (++ran === BACKLOG_HEAD) headReached();
      }
    });
  await head;
  const t0 = performance.now();
  await boss.send("noop", { probe: true }, { priority: 10 });
  const ms = (await probe) - t0;
  console.log(JSON.stringify({ ms }));
} else if (mode === "throughput") {
  await boss.deleteAllQueues?.().catch(() => {});
  await boss.createQueue("noop");
  for (let i = 0; i < n; i += 1000)
    await boss.insert(Array.from({ length: Math.min(1000, n - i) }, () => ({ name: "noop", data: {} })));
  // statistics as autovacuum would have them a minute later (all three peers get the same)
  await boss.getDb().executeSql("analyze pgboss.job");
  let count = 0;
  let done;
  const finished = new Promise((r) => (done = r));
  const start = performance.now();
  for (let w = 0; w < slots; w++)
    await boss.work("noop", { batchSize, pollingIntervalSeconds }, async (jobs) => {
      count += jobs.length;
      if (count >= n) done();
    });
  await finished;
  const seconds = (performance.now() - start) / 1000;
  console.log(JSON.stringify({ jobsPerSecond: n / seconds, seconds }));
} else if (mode === "latency") {
  let resolveStart;
  for (let w = 0; w < slots; w++)
    await boss.work("lat", { batchSize: 1, pollingIntervalSeconds }, async () => {
      resolveStart(performance.now());
    });
  await new Promise((r) => setTimeout(r, 1000));
  const samples = [];
  for (let i = 0; i < n; i++) {
    const started = new Promise((r) => (resolveStart = r));
    const t0 = performance.now();
    await boss.send("lat", { i });
    samples.push((await started) - t0);
  }
  console.log(JSON.stringify({ samples }));
} else if (mode === "idle") {
  for (let w = 0; w < slots; w++)
    await boss.work("noop", { batchSize, pollingIntervalSeconds }, async () => {});
  console.log(JSON.stringify({ ready: true }));
  await new Promise((resolve) => process.on("SIGTERM", resolve));
}
await boss.stop({ graceful: false, wait: false }).catch(() => {});
process.exit(0);
