/**
 * After an outage in which the pool's connections failed again and again (a proxy that resets every
 * connection, as a restart, a failover or a network cut does), every statement runs soon after the
 * database is back: none waits out a reconnect backoff that grew during the outage. postgres.js
 * counts failed sockets across the whole client and, by default, makes a connection that failed
 * wait 3^n / 100 s (at most 20 s) before it connects again for the statement handed to it; with a
 * pool of 4 cut and three statements tried during the outage, the statement that got the
 * connection of the seventh failure waited 10-20 s (docs/decisions.md, "A connection waits at most
 * a second to reconnect"; the job loop's stall after a cut, docs/jobs.md "Outages").
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import {
  type Database,
  execute,
  openDatabase,
  RECONNECT_BACKOFF_MAX_SECONDS,
  reconnectBackoff,
} from "../../src/db/client.ts";
import { describeDatabaseFailure } from "../../src/db/database-failure.ts";
import { withTimeout } from "../../src/runtime/with-timeout.ts";
import { asRole, createTestDatabase, type TestDatabase, TOPOLOGY } from "../helpers/database.ts";
import { TcpProxy } from "../helpers/tcp-proxy.ts";

const POOL = 4;
/** Statements tried while the database is away: with the pool's four, the seventh failed socket. */
const OUTAGE_TRIES = 3;
/** No statement may take longer than this, during the outage or after it (before the fix: 10-20 s). */
const BOUND_MS = 5_000;

let t: TestDatabase;
let proxy: TcpProxy;

beforeAll(async () => {
  t = await createTestDatabase();
  const target = new URL(t.url);
  proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
});

afterAll(async () => {
  await proxy.close();
  await t.drop();
});

/** The app's pool through the proxy, and the connections its driver saw close (`onclose`). */
async function openThroughProxy(): Promise<{ app: Database; closes: () => number }> {
  const url = new URL(asRole(t.url, "plinth_app"));
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const app = await openDatabase(url.toString(), {
    poolSize: POOL,
    connectTimeoutSeconds: 5,
    applicationName: `plinth-outage-${process.pid}`,
    poolMode: TOPOLOGY === "scaled" ? "transaction" : "session",
  });
  let closes = 0;
  // the driver's documented `onclose` hook, read by postgres.js at each close
  const client = (app.db as unknown as { $client: { options: { onclose?: () => void } } }).$client;
  client.options.onclose = () => {
    closes++;
  };
  return { app, closes: () => closes };
}

/** Waits (bounded, ticking on the test's own connection) until `done()`. */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + BOUND_MS;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${BOUND_MS} ms`);
    await execute(t.database.db, sql`select 1`);
  }
}

/** One statement on the app's pool: how long it took and how it ended; a hang past the bound throws. */
async function timed(app: Database): Promise<{ ms: number; failure?: string }> {
  const started = performance.now();
  try {
    await withTimeout(execute(app.db, sql`select 1 as one`), BOUND_MS, "a statement on the app's pool");
    return { ms: performance.now() - started };
  } catch (error) {
    if (error instanceof Error && error.message.includes("timed out after")) throw error;
    return { ms: performance.now() - started, failure: describeDatabaseFailure(error).class };
  }
}

test("statements handed to connections that failed during an outage run within the bound once the database is back", async () => {
  const { app, closes } = await openThroughProxy();
  try {
    // as many statements at once as the pool holds: each opens a connection of its own
    const warm = await Promise.all(Array.from({ length: POOL }, () => timed(app)));
    expect(warm.filter((w) => w.failure)).toEqual([]);
    proxy.down();
    await until(() => closes() >= POOL, "the pool's connections to close");
    // each statement while the database is away takes a closed connection, fails to connect (reset)
    // and counts one more failed socket
    for (let i = 0; i < OUTAGE_TRIES; i++) {
      const during = await timed(app);
      expect(["connection lost", "host unreachable"]).toContain(during.failure ?? "it ran");
    }
    await until(() => closes() >= POOL + OUTAGE_TRIES, "the outage's attempts to close");
    proxy.up();
    // more at once than the pool holds: every connection reconnects, the one that failed last too
    const after = await Promise.all(Array.from({ length: 2 * POOL }, () => timed(app)));
    expect(after.filter((a) => a.failure)).toEqual([]);
    expect(Math.max(...after.map((a) => a.ms))).toBeLessThan(BOUND_MS);
  } finally {
    await app.close(1);
  }
});

test("the reconnect backoff: postgres.js's curve, never more than a second", () => {
  // the first failures as postgres.js waits them (3^n / 100 s, jittered to half to all of it)
  expect(reconnectBackoff(1, () => 1)).toBeCloseTo(0.03);
  expect(reconnectBackoff(3, () => 0)).toBeCloseTo(0.135);
  expect(reconnectBackoff(4, () => 1)).toBeCloseTo(0.81);
  // from the fifth on, the cap: postgres.js waited up to 2.4 s, 7.3 s, then 20 s
  for (const failures of [5, 6, 7, 20, 1_000])
    for (const random of [0, 0.5, 1]) {
      const seconds = reconnectBackoff(failures, () => random);
      expect(seconds).toBeLessThanOrEqual(RECONNECT_BACKOFF_MAX_SECONDS);
      expect(seconds).toBeGreaterThanOrEqual(RECONNECT_BACKOFF_MAX_SECONDS / 2);
    }
});
