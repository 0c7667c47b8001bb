import { sql } from "drizzle-orm";
import postgres from "postgres";
import { systemClock } from "../src/clock.ts";
import { execute, openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrator.ts";
import { enqueueMany } from "../src/jobs/enqueue.ts";
import { systemNoop } from "../src/jobs/registry.ts";
import { claimJobs, completeJobs } from "../src/jobs/queue.ts";
const groups = Number(process.argv[2] ?? 0);
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists prof_jobs with (force)");
await admin.unsafe("create database prof_jobs");
if (process.env.PCM) await admin.unsafe(`alter database prof_jobs set plan_cache_mode = ${process.env.PCM}`);
await admin.end();
const database = await openDatabase("postgres://postgres@127.0.0.1:5432/prof_jobs", { poolSize: 4 });
await migrate(database.db);
await enqueueMany(database.db, { clock: systemClock }, Array.from({ length: 20000 }, (_, i) => ({ job: systemNoop, payload: {}, options: groups > 0 ? { tenantId: `t-${i % groups}` } : {} })));
await execute(database.db, sql`analyze background_jobs`);
let cursor = "";
let tc = 0, tk = 0;
for (let i = 0; i < 30; i++) {
  const a = performance.now();
  const { completeAndClaimJobs } = await import("../src/jobs/queue.ts");
  const r = await completeAndClaimJobs(database.db, { workerId: "w", kinds: ["system.noop"], limit: 500, now: new Date(), complete: [], groupCursor: cursor });
  cursor = r.cursor;
  const b = performance.now();
  await completeJobs(database.db, { workerId: "w", jobs: r.claimed.map((j) => ({ id: j.id, attempts: j.attempts })), now: new Date() });
  const c = performance.now();
  if (i >= 5) { tc += b - a; tk += c - b; }
  if (process.env.EACH) process.stdout.write(`${(b - a).toFixed(1)}/${(c - b).toFixed(1)} `);
}
console.log(`groups ${groups}: claim 500 ${(tc / 25).toFixed(1)} ms, complete 500 ${(tk / 25).toFixed(1)} ms`);
await database.close();
