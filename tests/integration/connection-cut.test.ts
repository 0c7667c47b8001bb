/**
 * A connection PostgreSQL cuts (pg_terminate_backend: what a restart, a failover or a pooler's
 * restart does to every session) never hangs the API nor throws outside a promise: the statement on
 * the cut connection fails at once with a connection-lost error (describeDatabaseFailure), the next
 * ones run on a fresh connection, and no dead connection goes back to the pool. Through
 * withTransaction (the pipelined runner on a reserved connection), withDatabase (the per-statement
 * reader) and plain statements, pool sizes 1 and 10, cut while idle and mid-transaction. Every wait is
 * bounded: a hang fails the test instead of stalling it (docs/decisions.md, "A cut connection").
 * On both topologies (scripts/test.sh): behind PgBouncer the cut connections are PgBouncer's server
 * connections, and "the next ones run" holds once PgBouncer has dropped them (poolerSeen); before,
 * a statement it hands one fails fast as lost, like one on a direct connection whose close the
 * driver has not seen yet (docs/runbooks/database-restart.md, "Behind PgBouncer").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { systemCtx } from "../../src/context.ts";
import { type Database, execute } from "../../src/db/client.ts";
import { describeDatabaseFailure } from "../../src/db/database-failure.ts";
import { withDatabase, withTransaction } from "../../src/db/operation.ts";
import { toAppError } from "../../src/http/problem-json.ts";
import { withTimeout } from "../../src/runtime/with-timeout.ts";
import { createTestApp } from "../helpers/app.ts";
import { type CountedPool, countedCloses } from "../helpers/counted-closes.ts";
import {
  asRole,
  createTestDatabase,
  databaseUrl,
  openTestDatabase,
  POOLER_URL,
  type TestDatabase,
  TOPOLOGY,
} from "../helpers/database.ts";

/** No statement on a cut connection, nor the first ones after it, may take longer than this. */
const BOUND_MS = 5_000;

let t: TestDatabase;
const uncaught: unknown[] = [];
const onUncaught = (error: unknown) => {
  uncaught.push(error);
};

beforeAll(async () => {
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUncaught);
  t = await createTestDatabase();
  if (TOPOLOGY === "scaled")
    pooler = postgres(databaseUrl("pgbouncer", POOLER_URL), { max: 1, fetch_types: false, prepare: false });
});

afterAll(async () => {
  process.off("uncaughtException", onUncaught);
  process.off("unhandledRejection", onUncaught);
  await pooler?.end();
  await t.drop();
});

/** Terminates every backend of the app's pool (by its application name), as the owner. */
async function cutAll(applicationName: string): Promise<number[]> {
  const rows = await execute<{ pid: number }>(
    t.database.db,
    sql`select pid, pg_terminate_backend(pid) as ok from pg_stat_activity
      where datname = current_database() and application_name = ${applicationName}`,
  );
  return rows.map((row) => row.pid);
}

/** PgBouncer's admin console (scaled topology only): the server connections it holds. */
let pooler: postgres.Sql | undefined;

/**
 * Waits (bounded) until PgBouncer holds none of the cut backends `pids` among its server connections
 * (SHOW SERVERS' remote_pid; none to wait for on the single topology). It drops an idle one when it
 * reads the backend's termination, within milliseconds; until then it may link one to a statement,
 * forward the statement to the dead backend and close the app's connection under it ("server conn
 * crashed?" in its log): the statement fails as lost (CONNECTION_CLOSED). Once they are dropped, no
 * statement may fail: the pooler's counterpart of closesSeen.
 */
async function poolerSeen(pids: number[]): Promise<void> {
  if (!pooler) return;
  const deadline = performance.now() + BOUND_MS;
  for (;;) {
    const servers = await pooler.unsafe<{ remote_pid: string }[]>("show servers", [], {
      simple: true,
    } as never);
    const held = servers.filter((server) => pids.includes(Number(server.remote_pid))).length;
    if (held === 0) return;
    if (performance.now() > deadline) throw new Error(`PgBouncer still holds ${held} cut servers`);
  }
}

/**
 * Waits (bounded) until the app's driver has seen `n` of its connections close since `since`: a
 * statement sent on a cut connection before its socket's close arrives can only fail (fast, as lost);
 * once the closes are seen, no statement may fail.
 */
async function closesSeen(app: App, since: number, n: number): Promise<void> {
  const deadline = performance.now() + BOUND_MS;
  while (app.closes - since < n) {
    if (performance.now() > deadline) throw new Error(`${app.closes - since} of ${n} closes seen`);
    await execute(t.database.db, sql`select 1`);
  }
}

/** `promise`'s outcome within BOUND_MS: its value, or the error it failed with; a hang throws. */
async function outcome<T>(
  promise: Promise<T>,
  what: string,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await withTimeout(promise, BOUND_MS, what) };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith(`${what} timed out`)) throw error;
    return { ok: false, error };
  }
}

/** A failure on the cut connection must say the connection was lost, nothing else. */
function expectLost(result: { ok: true } | { ok: false; error: unknown }): void {
  if (result.ok) return;
  expect(describeDatabaseFailure(result.error).class).toBe("connection lost");
  // what the API answers for it: 503, retry after a second
  const answer = toAppError(result.error);
  expect([answer.code, answer.retryAfterSeconds]).toEqual(["unavailable", 1]);
}

const tenantId = crypto.randomUUID();
const ctx = () => systemCtx("connection-cut", tenantId);

type Way = "withTransaction" | "withDatabase" | "plain";
const ways: Way[] = ["withTransaction", "withDatabase", "plain"];

function statement(app: Database, way: Way): Promise<number> {
  const count = sql`select count(*)::int as n from users`;
  const n = (rows: { n: number }[]) => rows[0]?.n ?? -1;
  if (way === "withTransaction")
    return withTransaction({ database: app }, ctx(), async (tx) =>
      n(await execute<{ n: number }>(tx, count)),
    );
  if (way === "withDatabase")
    return withDatabase({ database: app }, ctx(), async (db) => n(await execute<{ n: number }>(db, count)));
  return execute<{ n: number }>(app.db, count).then(n);
}

/** Every way, `times` each at once (more than the pool holds): all succeed within the bound. */
async function allSucceed(app: Database, times: number, what: string): Promise<void> {
  const runs = ways.flatMap((way) =>
    Array.from({ length: times }, () =>
      statement(app, way).then(
        (value) => ({ way, value }),
        (error: unknown) => ({ way, value: describeDatabaseFailure(error) }),
      ),
    ),
  );
  const values = await withTimeout(Promise.all(runs), BOUND_MS, what);
  expect(values.filter((v) => v.value !== 0)).toEqual([]);
}

let apps = 0;
type App = CountedPool;

async function openApp(poolSize: number): Promise<App> {
  const name = `plinth-cut-${process.pid}-${apps++}`;
  const app = await openTestDatabase(asRole(t.url, "plinth_app"), {
    poolSize,
    connectTimeoutSeconds: 5,
    applicationName: name,
  });
  return countedCloses(app, name);
}

for (const poolSize of [1, 10]) {
  describe(`pool of ${poolSize}`, () => {
    for (const way of ways) {
      test(`${way}: right after every connection of the pool was cut, fails fast as lost or runs; the next ones run`, async () => {
        const opened = await openApp(poolSize);
        const { app, name } = opened;
        try {
          await allSucceed(app, poolSize, "warm-up");
          const since = opened.closes;
          const pids = await cutAll(name);
          expect(pids.length).toBeGreaterThan(0);
          // right after the cut, before the driver may have seen the sockets close
          const first = await outcome(statement(app, way), `${way} right after the cut`);
          expectLost(first);
          // behind a transaction pooler the cut server connections were idle ones of the pooler's:
          // the app's own connections to the pooler stay open
          await closesSeen(opened, since, TOPOLOGY === "single" ? pids.length : 0);
          // ... but PgBouncer may still hold the cut server connections: a statement it hands one fails
          await poolerSeen(pids);
          for (let round = 0; round < 3; round++) {
            const next = await outcome(statement(app, way), `${way} after the cut, round ${round}`);
            expect(next).toEqual({ ok: true, value: 0 });
          }
          await allSucceed(app, poolSize + 2, "every way after the cut");
          expect(uncaught).toEqual([]);
        } finally {
          await app.close(1);
        }
      });
    }

    test("withTransaction: those sent at once right after the cut fail fast as lost, at most one per cut connection; once the cut ones are dropped, all run", async () => {
      const opened = await openApp(poolSize);
      const { app, name } = opened;
      try {
        await allSucceed(app, poolSize, "warm-up");
        const since = opened.closes;
        const pids = await cutAll(name);
        expect(pids.length).toBeGreaterThan(0);
        // before the driver (single) or PgBouncer (scaled) has seen the cut connections close: each one
        // handed to a transaction fails that one transaction (behind PgBouncer: the server connection it
        // links, which closes the app's connection under it), so a client sees a 503 with Retry-After: 1
        const results = await Promise.all(
          Array.from({ length: poolSize + 2 }, (_, i) =>
            outcome(statement(app, "withTransaction"), `transaction ${i} right after the cut`),
          ),
        );
        for (const result of results) {
          if (result.ok) expect(result.value).toBe(0);
          else expectLost(result);
        }
        expect(results.filter((result) => !result.ok).length).toBeLessThanOrEqual(pids.length);
        await closesSeen(opened, since, TOPOLOGY === "single" ? pids.length : 0);
        await poolerSeen(pids);
        await allSucceed(app, poolSize + 2, "every way once the cut connections are dropped");
        expect(uncaught).toEqual([]);
      } finally {
        await app.close(1);
      }
    });

    test("withTransaction: the connection cut mid-transaction fails the transaction as lost, never returns to the pool", async () => {
      const opened = await openApp(poolSize);
      const { app, name } = opened;
      try {
        await allSucceed(app, poolSize, "warm-up");
        for (const mode of ["between statements", "statement in flight"] as const) {
          const since = opened.closes;
          let pids: number[] = [];
          const cut = withTransaction({ database: app }, ctx(), async (tx) => {
            await execute(tx, sql`select count(*) from users`);
            if (mode === "between statements") pids = await cutAll(name);
            // the backend terminates itself under the statement in flight
            else await execute(tx, sql`select pg_terminate_backend(pg_backend_pid())`);
            await execute(tx, sql`select count(*) from users`);
            return "committed";
          });
          const result = await outcome(cut, `the cut transaction (${mode})`);
          expect(result.ok).toBe(false);
          expectLost(result);
          await closesSeen(
            opened,
            since,
            mode === "between statements" && TOPOLOGY === "single" ? pids.length : 1,
          );
          await poolerSeen(pids);
          await allSucceed(app, poolSize + 2, `every way after the cut (${mode})`);
        }
        expect(uncaught).toEqual([]);
      } finally {
        await app.close(1);
      }
    });

    test("withTransaction: one waiting for a connection while the pool's are cut gets a fresh one", async () => {
      const opened = await openApp(poolSize);
      const { app, name } = opened;
      let open!: () => void;
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      try {
        await allSucceed(app, poolSize, "warm-up");
        let started = 0;
        const holders = Array.from({ length: poolSize }, () =>
          withTransaction({ database: app }, ctx(), async (tx) => {
            await execute(tx, sql`select count(*) from users`);
            started++;
            await gate;
            return execute(tx, sql`select count(*) from users`);
          }),
        );
        const holding = holders.map((h, i) => outcome(h, `holder ${i}`));
        const deadline = performance.now() + BOUND_MS;
        while (started < poolSize) {
          if (performance.now() > deadline) throw new Error("the holders did not start");
          await execute(t.database.db, sql`select 1`);
        }
        // every connection is reserved: this one waits in the pool's queue
        const waiting = outcome(statement(app, "withTransaction"), "the queued transaction");
        const since = opened.closes;
        const pids = await cutAll(name);
        expect(pids.length).toBe(poolSize);
        await closesSeen(opened, since, poolSize);
        open();
        for (const result of await Promise.all(holding)) {
          expect(result.ok).toBe(false);
          expectLost(result);
        }
        expect(await waiting).toEqual({ ok: true, value: 0 });
        await allSucceed(app, poolSize + 2, "every way after the cut");
        expect(uncaught).toEqual([]);
      } finally {
        open();
        await app.close(1);
      }
    });

    test("withDatabase and plain statements: the statement in flight at the cut fails as lost; the next runs", async () => {
      const opened = await openApp(poolSize);
      const { app } = opened;
      try {
        await allSucceed(app, poolSize, "warm-up");
        const since = opened.closes;
        const inFlight = [
          withDatabase({ database: app }, ctx(), (db) =>
            execute(db, sql`select pg_terminate_backend(pg_backend_pid())`),
          ),
          execute(app.db, sql`select pg_terminate_backend(pg_backend_pid())`),
        ];
        const results = await Promise.all(inFlight.map((p, i) => outcome(p, `statement in flight ${i}`)));
        for (const result of results) {
          expect(result.ok).toBe(false);
          expectLost(result);
        }
        await closesSeen(opened, since, Math.min(poolSize, inFlight.length));
        await allSucceed(app, poolSize + 2, "every way after the cut");
        expect(uncaught).toEqual([]);
      } finally {
        await app.close(1);
      }
    });
  });
}

test("the API answers a request whose connection was cut with 503 and Retry-After, a warning without a stack", async () => {
  const { app } = await openApp(1);
  const api = await createTestApp({ database: app });
  try {
    // a route of the test's own, whose transaction's backend is terminated under its statement
    api.app.get("/api/probe", (c) =>
      withTransaction({ database: app }, ctx(), async (tx) => {
        await execute(tx, sql`select pg_terminate_backend(pg_backend_pid())`);
        return c.json({ ok: true });
      }),
    );
    const answer = await withTimeout(api.request("/api/probe"), BOUND_MS, "the cut request");
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toBe("1");
    expect(((await answer.json()) as { code: string }).code).toBe("unavailable");
    const lines = api.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
    const refused = lines.find((r) => r.msg === "request refused: database unavailable");
    expect(refused?.cause).toMatch(/^connection lost \((57P01|CONNECTION_CLOSED|ECONNRESET)\)$/);
    expect(lines.some((r) => r.msg === "unhandled error")).toBe(false);
    expect(uncaught).toEqual([]);
  } finally {
    await api.close();
    await app.close(1);
  }
});
