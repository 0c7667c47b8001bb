/**
 * Statements on a cut connection of a one-connection pool fail at once or run: none waits for
 * `connect_timeout`. With withDatabase's tenant prelude (the per-statement context, written ahead of
 * the statement in the same message) and without it: two written at once right after the cut, three
 * one after another, and one written behind the statement under which the backend terminates (both
 * on the wire when the socket closes). Before the postgres.js patch of b3e8938 the second statement
 * after a cut waited for ever and the third for connect_timeout: the socket's error rejected the
 * statement under way, but the close that followed kept it as the connection's `query` and kept the
 * dead socket's write timer, so the next socket never wrote its startup message and took itself for
 * busy (docs/decisions.md, "A statement on a cut connection never waits for connect_timeout").
 * Straight to PostgreSQL in either topology: this is the driver's own connection.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import { describeDatabaseFailure } from "../../src/db/database-failure.ts";
import { withDatabase } from "../../src/db/operation.ts";
import { withTimeout } from "../../src/runtime/with-timeout.ts";
import { type CountedPool, countedCloses } from "../helpers/counted-closes.ts";
import { asRole, createTestDatabase, type TestDatabase } from "../helpers/database.ts";

/** Seconds a statement would wait for a connection that never opens: far above FAST_MS. */
const CONNECT_TIMEOUT_SECONDS = 10;
/** The longest any statement on or after the cut may take (measured: under 60 ms). */
const FAST_MS = 1_000;
/** Cuts per test: before the fix the wait came in every run of the sequential shape. */
const ROUNDS = 5;

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});

afterAll(async () => {
  await t.drop();
});

const ctx = systemCtx("connection-cut-wait", crypto.randomUUID());

type Way = "withDatabase" | "plain";

function read(app: Database, way: Way, query = sql`select count(*)::int as n from users`): Promise<unknown> {
  if (way === "withDatabase") return withDatabase({ database: app }, ctx, (db) => execute(db, query));
  return execute(app.db, query);
}

interface Outcome {
  ok: boolean;
  ms: number;
  failure?: string;
}

/** How `promise` settled and how long it took from `start`; a statement slower than FAST_MS throws. */
async function timed(promise: Promise<unknown>, start: number, what: string): Promise<Outcome> {
  try {
    await withTimeout(promise, FAST_MS, what);
    return { ok: true, ms: performance.now() - start };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith(`${what} timed out`)) throw error;
    return { ok: false, ms: performance.now() - start, failure: describeDatabaseFailure(error).class };
  }
}

/** Each failed as lost (never a timeout, never another class) and settled within FAST_MS. */
function expectFastOrLost(outcomes: Outcome[]): void {
  for (const outcome of outcomes) {
    expect(outcome.ms).toBeLessThan(FAST_MS);
    if (!outcome.ok) expect(outcome.failure).toBe("connection lost");
  }
}

let apps = 0;

type App = CountedPool;

async function openApp(): Promise<App> {
  const name = `plinth-cut-wait-${process.pid}-${apps++}`;
  const app = await openDatabase(asRole(t.directUrl, "plinth_app"), {
    poolSize: 1,
    connectTimeoutSeconds: CONNECT_TIMEOUT_SECONDS,
    applicationName: name,
  });
  return countedCloses(app, name);
}

/**
 * Waits (bounded) until the driver has seen the cut connection close: a statement written before
 * that may only fail (fast, as lost); one written after it must run.
 */
async function closeSeen(opened: App, since: number): Promise<void> {
  const deadline = performance.now() + FAST_MS;
  while (opened.closes === since) {
    if (performance.now() > deadline) throw new Error("the driver did not see the cut connection close");
    await execute(t.database.db, sql`select 1`);
  }
}

async function cut(name: string): Promise<void> {
  const rows = await execute(
    t.database.db,
    sql`select pg_terminate_backend(pid) from pg_stat_activity
      where datname = current_database() and application_name = ${name}`,
  );
  expect(rows.length).toBe(1);
}

for (const way of ["withDatabase", "plain"] as const) {
  describe(way, () => {
    test("two statements written at once right after the cut, then three one after another: each fails as lost or runs within a second; then they run", async () => {
      const opened = await openApp();
      const { app, name } = opened;
      try {
        for (let round = 0; round < ROUNDS; round++) {
          await read(app, way);
          const since = opened.closes;
          await cut(name);
          const start = performance.now();
          const atOnce = await Promise.all(
            [0, 1].map((i) => timed(read(app, way), start, `round ${round}: statement ${i} at once`)),
          );
          expectFastOrLost(atOnce);
          const oneByOne: Outcome[] = [];
          for (let i = 0; i < 3; i++)
            oneByOne.push(
              await timed(read(app, way), performance.now(), `round ${round}: statement ${i} one by one`),
            );
          expectFastOrLost(oneByOne);
          await closeSeen(opened, since);
          expect(await timed(read(app, way), performance.now(), `round ${round}: after`)).toMatchObject({
            ok: true,
          });
        }
      } finally {
        await app.close(1);
      }
    });

    test("a statement written behind the one under which the backend terminates fails as lost within a second; the next runs", async () => {
      const opened = await openApp();
      const { app } = opened;
      try {
        for (let round = 0; round < ROUNDS; round++) {
          await read(app, way);
          const since = opened.closes;
          const start = performance.now();
          // one connection: the second is pipelined behind the first, both on the wire at the close
          const inFlight = [
            timed(
              read(app, way, sql`select pg_terminate_backend(pg_backend_pid())`),
              start,
              `round ${round}: the terminating statement`,
            ),
            timed(read(app, way), start, `round ${round}: the statement behind it`),
          ];
          const outcomes = await Promise.all(inFlight);
          expectFastOrLost(outcomes);
          expect(outcomes.map((outcome) => outcome.ok)).toEqual([false, false]);
          await closeSeen(opened, since);
          expect(await timed(read(app, way), performance.now(), `round ${round}: after`)).toMatchObject({
            ok: true,
          });
        }
      } finally {
        await app.close(1);
      }
    });
  });
}
