import { afterAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { enqueueMany } from "../../src/jobs/enqueue.ts";
import { systemNoop } from "../../src/jobs/registry.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";
import { type Child, spawnBun } from "../helpers/processes.ts";
import { TcpProxy } from "../helpers/tcp-proxy.ts";

// Two API processes drain 10,000 jobs through a proxy in front of PostgreSQL; in the middle the
// proxy drops every connection and refuses new ones for a moment (what a restart or a failover
// does to the processes), then forwards again. Every job must succeed soon after — not one lease
// (five minutes) later — and none may run twice: each claim counts an attempt, so a job run twice
// ends with attempts 2 (a run released at shutdown gives its attempt back; none is stopped here).

const JOBS = 10_000;
const CUT_AFTER = 8_000;
const t = useTestDatabase({ poolSize: 4 });
const children: Child[] = [];
let proxy: TcpProxy | undefined;

afterAll(async () => {
  for (const c of children.splice(0)) {
    if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
    await c.proc.exited;
  }
  await proxy?.close();
});

async function statuses(): Promise<Record<string, number>> {
  const rows = await execute<{ status: string; n: number }>(
    t.database.db,
    sql`select status, count(*)::int as n from background_jobs group by status`,
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

test("two API processes drain 10,000 jobs across a cut of every database connection: all succeed within 30 s, none runs twice", async () => {
  const target = new URL(t.url);
  proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  const viaProxy = new URL(t.url);
  viaProxy.hostname = "127.0.0.1";
  viaProxy.port = String(proxy.port);
  const env = {
    DATABASE_URL: viaProxy.toString(),
    PORT: "0",
    Database__PoolSize: "4",
    Logging__Level: "warn",
    BackgroundProcessing__JobPollSeconds: "1",
    // only the job loop: the other loops' outage lines are not what this test is about
    TenantDomains__Enabled: "false",
    SaasSubscriptions__Enabled: "false",
    FeatureUsageReconciliation__Enabled: "false",
    BackgroundProcessing__SchedulesEnabled: "false",
  };
  const ids = await enqueueMany(
    t.database.db,
    { clock: new ManualClock() },
    Array.from({ length: JOBS }, () => ({ job: systemNoop, payload: {} })),
  );
  expect(ids).toHaveLength(JOBS);
  const enqueuedAt = Date.now();
  for (let i = 0; i < 2; i++) children.push(spawnBun(["src/server.ts"], env));
  // the cut comes once both processes are draining: 8,000 done, and jobs held by two workers. Late,
  // so that the 30 s after it measure the recovery, not this machine's speed: with 8,000 jobs left
  // (a cut at 2,000 done) their drain alone took 10-23 s of the 30 (~350-400 jobs/s here), and in
  // some runs both processes also made no progress for 8-17 s after the cut (a claim handed to a
  // connection waiting out postgres.js's reconnect backoff, grown by the outage's failed sockets:
  // now at most 1 s, docs/decisions.md "A connection waits at most a second to reconnect";
  // tests/integration/connection-outage.test.ts), together over 30 s. With 2,000 left: 2-4 s.
  // A job left for its lease (five minutes) fails the bound whenever the cut comes (checked on
  // 99a664c, before the fix: 8 jobs left processing).
  await waitFor(
    async () => {
      const [row] = await execute<{ succeeded: number; workers: number }>(
        t.database.db,
        sql`select count(*) filter (where status = 'succeeded')::int as succeeded,
                   count(distinct locked_by) filter (where status = 'processing')::int as workers
            from background_jobs`,
      );
      return (row?.succeeded ?? 0) >= CUT_AFTER && row?.workers === 2;
    },
    { timeoutMs: 90_000, what: `both processes to be draining, ${CUT_AFTER} jobs done` },
  );

  proxy.down();
  const cutAt = Date.now();
  process.stdout.write(
    `cut ${cutAt - enqueuedAt} ms after the enqueue, ${JSON.stringify(await statuses())}\n`,
  );
  await Bun.sleep(300); // the database away for a moment, as in a fast restart
  proxy.up();

  try {
    await waitFor(async () => (await statuses()).succeeded === JOBS, {
      timeoutMs: 30_000 - (Date.now() - cutAt),
      intervalMs: 100,
      what: "every job to succeed",
    });
  } catch (error) {
    throw new Error(
      `${(error as Error).message}; statuses ${JSON.stringify(await statuses())}\n${children
        .map((c) =>
          c.lines
            .filter((l) => !l.includes('"slow query"'))
            .slice(-30)
            .join("\n"),
        )
        .join("\n---\n")}`,
    );
  }
  process.stdout.write(`every job succeeded ${Date.now() - cutAt} ms after the cut\n`);
  // both processes were draining when the connections went: each logged the failed statement
  for (const child of children)
    expect(child.lines.some((l) => l.includes('"msg":"job loop statement failed"'))).toBe(true);
  const [runs] = await execute<{ twice: number; total: number }>(
    t.database.db,
    sql`select count(*) filter (where attempts <> 1)::int as twice, count(*)::int as total from background_jobs`,
  );
  expect(runs).toEqual({ twice: 0, total: JOBS });
}, 120_000);
