// One default-mode drain of N no-op jobs (as bench/jobs.ts `plinthThroughput`: 4 slots, batches of
// 5, a 2 s poll) in a database of its own, printing jobs/s and the CPU the database's backends and
// this process spent per job (clock ticks from /proc: less sensitive to other load than wall time).
// For a same-run A/B of trees on a busy machine: copy it into each checkout and run them in turn,
// each under the bench lock (docs/performance.md, "The fan-in only where a finished job has dependents").
//   bun bench/jobs-drain-cpu.ts [jobs=5000]
import { readFileSync } from "node:fs";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { systemClock } from "../src/clock.ts";
import { execute, openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrator.ts";
import { enqueueMany } from "../src/jobs/enqueue.ts";
import { createJobLoop } from "../src/jobs/job-loop.ts";
import { createJobRegistry, systemNoop } from "../src/jobs/registry.ts";
import { createRedactor } from "../src/redact.ts";
import { createLogger } from "../src/telemetry/logger.ts";

const N = Number(process.argv[2] ?? 5000);
const name = `drainab_${process.pid}`;
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe(`create database "${name}"`);
const url = `postgres://postgres@127.0.0.1:5432/${name}`;
const setup = await openDatabase(url, { poolSize: 2 });
await migrate(setup.db);
await setup.close();
const database = await openDatabase(url, { poolSize: 10 });
await enqueueMany(
  database.db,
  { clock: systemClock },
  Array.from({ length: N }, () => ({ job: systemNoop, payload: {} })),
);
await execute(database.db, sql`analyze background_jobs`);
const ticks = (pid: number) => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    const x = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return Number(x[11]) + Number(x[12]);
  } catch {
    return 0; // a backend that ended
  }
};
const backends = async () =>
  (await admin.unsafe(`select pid from pg_stat_activity where datname = '${name}'`)).map((r) =>
    Number(r.pid),
  );
const before = new Map((await backends()).map((p) => [p, ticks(p)]));
const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: (l) => process.stderr.write(`${l}\n`) });
let done = 0;
let finish: () => void = () => {};
const finished = new Promise<void>((r) => (finish = r));
const loop = createJobLoop(
  { database, clock: systemClock, logger, redactor },
  {
    registry: createJobRegistry(),
    parallelism: 4,
    batchSize: 5,
    pollMs: 2_000,
    onEvent: (e) => {
      if (e.type === "succeeded" && ++done === N) finish();
    },
    localQueue: 0,
  },
);
const cpu0 = process.cpuUsage();
const start = performance.now();
await loop.start();
await finished;
const seconds = (performance.now() - start) / 1000;
const cpu1 = process.cpuUsage(cpu0);
let pg = 0;
for (const p of await backends()) pg += ticks(p) - (before.get(p) ?? 0);
await loop.stop(5_000);
await database.close();
await admin.unsafe(`drop database "${name}" with (force)`);
await admin.end();
console.log(
  JSON.stringify({
    jobsPerSecond: N / seconds,
    pgCpuMsPerJob: (pg * 10) / N,
    bunCpuMsPerJob: (cpu1.user + cpu1.system) / 1000 / N,
  }),
);
