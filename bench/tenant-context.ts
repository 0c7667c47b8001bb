/**
 * What the tenant context costs a read, in process (issue #30):
 *
 *   bun bench/tenant-context.ts [--rounds 11] [--calls 4000]
 *
 * `listTenantUsers` (the page of `/api/tenant/users?limit=20`) on a tenant of twenty users, 64 calls
 * in flight, three ways in interleaved rounds: A, on the pool with no context (how reads ran before
 * #30: the work handed the pool itself); B, through withDatabase, each statement carrying the tenant's
 * context ahead of it (src/db/tenant-scope.ts, `scopePrelude`); C, in a scoped transaction (reserved
 * connection, `begin; set_config` pipelined, COMMIT not waited for: the previous attempt). Per way:
 * this process's CPU per call, the least of the rounds (other load on the machine only adds), and
 * the median; and the CPU of the pool's PostgreSQL backends per call (from /proc: same machine).
 * Needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { systemCtx, type TenantCtx } from "../src/context.ts";
import { execute, openDatabase, type Tx } from "../src/db/client.ts";
import { scopedRunnerOf } from "../src/db/tenant-scope.ts";
import { closeDeps } from "../src/deps.ts";
import { listTenantUsers } from "../src/identity/users.ts";
import { createTenant, createUser } from "../tests/helpers/identity.ts";
import { benchDeps } from "./plinth-process.ts";
import { median } from "./stats.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "11" },
    calls: { type: "string", default: "4000" },
  },
});
const ROUNDS = Number(values.rounds);
const CALLS = Number(values.calls);
const IN_FLIGHT = 64;

const { deps, database } = await benchDeps("tenant-context");
const { db } = deps.database;
// a connection of its own to find the pool's backends (their CPU: /proc, same machine)
const admin = await openDatabase(database.url, { poolSize: 1 });
const adminDb = admin.db;
const tenant = await createTenant(db);
for (let i = 0; i < 20; i++) await createUser(db, tenant.id);
const ctx: TenantCtx = systemCtx("bench", tenant.id);
const run = scopedRunnerOf(db);
if (!run) throw new Error("no pipelined runner: PostgreSQL only");

const ways: { name: string; call: () => Promise<unknown> }[] = [
  {
    name: "A. pool, no context (before)",
    // the pool handed to the work as withDatabase does with a ctx's own executor
    call: () => listTenantUsers(deps, { ...ctx, tx: db as unknown as Tx }, { limit: 20 }),
  },
  {
    name: "B. withDatabase, context in each statement",
    call: () => listTenantUsers(deps, ctx, { limit: 20 }),
  },
  {
    name: "C. scoped transaction, read mode (the previous attempt)",
    call: () =>
      run({ tenantId: tenant.id }, (tx) => listTenantUsers(deps, { ...ctx, tx }, { limit: 20 }), "read"),
  },
];

/** CPU ticks (10 ms) of every PostgreSQL backend serving this process's pool, summed. */
async function backendTicks(): Promise<number> {
  const pids = await execute<{ pid: number }>(
    adminDb,
    sql`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
  );
  let ticks = 0;
  for (const { pid } of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // a backend that ended meanwhile
    }
  }
  return ticks;
}

const serverCpu = ways.map(() => [] as number[]);

async function round(call: () => Promise<unknown>, way?: number): Promise<number> {
  let next = 0;
  const ticks = way === undefined ? 0 : await backendTicks();
  const start = process.cpuUsage();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < CALLS) {
        const page = (await call()) as { items: unknown[] };
        if (page.items.length !== 20) throw new Error(`a page of ${page.items.length}`);
      }
    }),
  );
  const used = process.cpuUsage(start);
  if (way !== undefined) serverCpu[way]?.push((((await backendTicks()) - ticks) * 10_000) / CALLS);
  return (used.user + used.system) / CALLS;
}

for (const way of ways) await round(way.call); // warm-up: JIT, prepared statements, lanes
const cpu = ways.map(() => [] as number[]);
for (let r = 0; r < ROUNDS; r++)
  for (const [i, way] of ways.entries()) cpu[i]?.push(await round(way.call, i));

const load = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
console.log(
  `\nlistTenantUsers, ${IN_FLIGHT} in flight, ${CALLS} calls, ${ROUNDS} interleaved rounds (${new Date().toISOString()}, load average ${load})\n`,
);
console.log("| way | CPU µs/call (least) | (median) | ÷ A (least) | PostgreSQL CPU µs/call (median) |");
console.log("| --- | ---: | ---: | ---: | ---: |");
const least = cpu.map((xs) => Math.min(...xs));
for (const [i, way] of ways.entries())
  console.log(
    `| ${way.name} | ${least[i]?.toFixed(1)} | ${median(cpu[i] ?? []).toFixed(1)} | ${((least[i] ?? 0) / (least[0] ?? 1)).toFixed(2)} | ${median(serverCpu[i] ?? []).toFixed(1)} |`,
  );
await admin.close();
await closeDeps(deps);
await database.drop();
process.exit(0);
