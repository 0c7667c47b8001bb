/**
 * A database that stops answering without closing anything (a failover or a partition that drops
 * packets: no RST, no FIN), through a proxy that acknowledges the bytes and never answers
 * (tests/helpers/tcp-proxy.ts `blackhole()`), then forwards new connections while the old ones stay
 * silent (`failover()`). In front of PostgreSQL, or PgBouncer in the scaled topology. Without
 * Database:AnswerTimeoutSeconds (the postgres.js patch's `answer_timeout`) a statement on such a
 * connection, and every statement handed to it after, waited for ever here (~15 min of kernel
 * retransmissions on a real network; measured in docs/decisions.md), and the LISTEN connection never
 * came back. Real waits: the answer timeout of 1 s and a connect timeout of 1 s.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { announceSessionChange, SessionCache } from "../../src/auth/session-cache.ts";
import { ManualClock } from "../../src/clock.ts";
import { type Database, execute, type OpenDatabaseOptions, openDatabase } from "../../src/db/client.ts";
import { describeDatabaseFailure } from "../../src/db/database-failure.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { createJobLoop } from "../../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { withTimeout } from "../../src/runtime/with-timeout.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { createTestApp, type TestApp } from "../helpers/app.ts";
import {
  API_ROLE_UNDER_TEST,
  asRole,
  createTestDatabase,
  databaseUrl,
  type TestDatabase,
  TOPOLOGY,
} from "../helpers/database.ts";
import { createTenant, createUser, signIn } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";
import { TcpProxy } from "../helpers/tcp-proxy.ts";

const ANSWER_TIMEOUT_SECONDS = 1;
/** A statement's bound: the answer timeout, a reconnect (backoff ≤ 1 s, connect ≤ 1 s) and slack. */
const BOUND_MS = 4_000;

let t: TestDatabase;
const proxies: TcpProxy[] = [];
const opened: Database[] = [];
const redactor = createRedactor([]);

beforeAll(async () => {
  t = await createTestDatabase();
});

afterEach(async () => {
  // whatever a test left hanging ends with it
  for (const proxy of proxies.splice(0)) await proxy.close();
  await Promise.allSettled(opened.splice(0).map((d) => d.close(0.1)));
});

afterAll(async () => {
  await t.drop();
});

/** `url` with its port moved to a new proxy in front of it. */
async function proxied(url: string, kept: TcpProxy[]): Promise<{ proxy: TcpProxy; url: string }> {
  const parsed = new URL(url);
  const proxy = await TcpProxy.start({ host: parsed.hostname, port: Number(parsed.port || 5432) });
  kept.push(proxy);
  parsed.port = String(proxy.port);
  return { proxy, url: parsed.toString() };
}

/**
 * The app's database (its role, this topology's URL) through a proxy; beside a pooler the direct
 * (LISTEN) connection through a second one. `cut` blackholes both, `failover` forwards both again.
 */
async function openProxied(
  options: OpenDatabaseOptions = {},
  kept: { proxies: TcpProxy[]; opened: Database[] } = { proxies, opened },
): Promise<{
  database: Database;
  cut(): void;
  failover(): void;
}> {
  const role = (url: string) => (API_ROLE_UNDER_TEST ? asRole(url, API_ROLE_UNDER_TEST) : url);
  const pool = await proxied(role(t.url), kept.proxies);
  const direct = TOPOLOGY === "scaled" ? await proxied(role(databaseUrl(t.name)), kept.proxies) : undefined;
  const database = await openDatabase(pool.url, {
    poolSize: 2,
    connectTimeoutSeconds: 1,
    answerTimeoutSeconds: ANSWER_TIMEOUT_SECONDS,
    listenHeartbeatSeconds: 1,
    ...(direct ? { poolMode: "transaction" as const, directUrl: direct.url } : {}),
    ...options,
  });
  kept.opened.push(database);
  const both = [pool.proxy, ...(direct ? [direct.proxy] : [])];
  return {
    database,
    cut: () => {
      for (const proxy of both) proxy.blackhole();
    },
    failover: () => {
      for (const proxy of both) proxy.failover();
    },
  };
}

interface Outcome {
  ms: number;
  failure?: string;
  code?: string;
}

/** How `promise` settled and how long it took; one slower than BOUND_MS fails the test. */
async function settled(promise: Promise<unknown>, what: string): Promise<Outcome> {
  const start = performance.now();
  try {
    await withTimeout(promise, BOUND_MS, what);
    return { ms: performance.now() - start };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith(`${what} timed out`)) throw error;
    const failure = describeDatabaseFailure(error);
    return { ms: performance.now() - start, failure: failure.class, code: failure.code };
  }
}

const selectOne = (database: Database) => execute(database.db, sql`select 1 as one`);

describe(`a database that stops answering (${TOPOLOGY})`, () => {
  test("a statement on the silent connection, and the one written behind it, fail as lost within the answer timeout", async () => {
    const { database, cut, failover } = await openProxied({ poolSize: 1 });
    await selectOne(database);
    cut();
    const [first, second] = await Promise.all([
      settled(selectOne(database), "first statement"),
      settled(selectOne(database), "second statement"),
    ]);
    expect(first).toMatchObject({ failure: "connection lost", code: "ANSWER_TIMEOUT" });
    expect(second.failure).toBe("connection lost");
    expect(first.ms).toBeGreaterThanOrEqual(ANSWER_TIMEOUT_SECONDS * 1000 - 50);
    failover();
    const after = await settled(selectOne(database), "statement after the failover");
    expect(after.failure).toBeUndefined();
  });

  test("after a failover whose old connections stay silent, statements run again within the answer timeout", async () => {
    const { database, cut, failover } = await openProxied();
    await Promise.all([selectOne(database), selectOne(database)]);
    cut();
    // readiness's way: a ping that gives up after its own timeout leaves its statement on the connection
    const pings = await Promise.allSettled([database.ping(200), database.ping(200)]);
    expect(pings.map((p) => p.status)).toEqual(["rejected", "rejected"]);
    failover();
    const outcomes = await Promise.all(
      Array.from({ length: 4 }, (_, i) => settled(selectOne(database), `statement ${i}`)),
    );
    // a statement handed to a connection still silent fails with it (503 to a request); none hangs
    expect(outcomes.every((o) => o.failure === undefined || o.failure === "connection lost")).toBe(true);
    const next = await settled(selectOne(database), "the next statement");
    expect(next.failure).toBeUndefined();
  });

  test("the LISTEN connection lost to silence is made again: NOTIFY arrives, onResubscribed runs", async () => {
    const { database, cut, failover } = await openProxied();
    const payloads: string[] = [];
    let resubscribed = 0;
    const unlisten = await database.listen(
      "blackhole_test",
      (payload) => payloads.push(payload),
      () => resubscribed++,
    );
    const notify = (payload: string) =>
      execute(t.database.db, sql`select pg_notify('blackhole_test', ${payload})`);
    await notify("before");
    await waitFor(() => payloads.includes("before"), { timeoutMs: 2_000, what: "NOTIFY before the cut" });
    cut();
    await notify("during");
    failover();
    // the heartbeat (1 s) finds it within the answer timeout (1 s); then postgres.js listens again
    await waitFor(() => resubscribed > 0, { timeoutMs: BOUND_MS, what: "LISTEN made again" });
    await notify("after");
    await waitFor(() => payloads.includes("after"), { timeoutMs: 2_000, what: "NOTIFY after the failover" });
    expect(payloads).not.toContain("during");
    await withTimeout(unlisten(), 2_000, "unlisten");
  });

  test("a session ended while the LISTEN connection was silent is not trusted from the cache afterwards", async () => {
    const { database, cut, failover } = await openProxied();
    const clock = new ManualClock();
    const cache = new SessionCache({ ttlMs: 60_000, clock });
    await cache.listen(database, createLogger({ level: "error", redactor, write: () => {} }));
    const entry = (sessionId: string) => ({
      sessionId,
      userId: crypto.randomUUID(),
      tenantId: null,
      expiresAt: new Date(clock.now().getTime() + 3_600_000),
      value: {},
    });
    cache.set("ended", entry(crypto.randomUUID()));
    cut();
    // another process ends the session; its NOTIFY goes to the silent connection
    await announceSessionChange(t.database.db, { sessionId: cache.get("ended")?.sessionId ?? "" });
    failover();
    await waitFor(() => cache.get("ended") === undefined, { timeoutMs: BOUND_MS, what: "the cache emptied" });
  });

  test("a statement that rightly outlasts the answer timeout runs inside withoutAnswerTimeout", async () => {
    const { database } = await openProxied({ poolSize: 1 });
    const slow = () => execute(database.db, sql`select pg_sleep(${ANSWER_TIMEOUT_SECONDS + 0.5})`);
    expect(await settled(slow(), "slow statement")).toMatchObject({ code: "ANSWER_TIMEOUT" });
    const unbounded = database.withoutAnswerTimeout;
    expect(unbounded).toBeDefined();
    expect((await settled(unbounded?.(slow) ?? slow(), "slow statement, unbounded")).failure).toBeUndefined();
  });

  test("the job loop runs jobs again after a failover", async () => {
    const { database, cut, failover } = await openProxied({ poolSize: 1 });
    const ran: string[] = [];
    const clock = new ManualClock();
    const job = defineJob("blackhole.probe", z.object({ n: z.string() }), (payload) => {
      ran.push(payload.n);
    });
    const loop = createJobLoop(
      {
        database,
        clock,
        logger: createLogger({ level: "error", redactor, write: () => {} }),
        redactor,
      },
      { registry: createJobRegistry([job]), parallelism: 2, batchSize: 2, pollMs: 200, listen: false },
    );
    await loop.start();
    try {
      const enqueueCtx = { clock };
      await enqueue(t.database.db, enqueueCtx, job, { n: "before" });
      await waitFor(() => ran.includes("before"), { timeoutMs: 5_000, what: "job before the cut" });
      cut();
      // the pool's connection goes silent under a statement (a request, readiness, a poll)
      await Promise.allSettled([database.ping(300)]);
      failover();
      await enqueue(t.database.db, enqueueCtx, job, { n: "after" });
      const start = performance.now();
      // without the answer timeout: only once the loop's own 10 s statement timeout gave up its poll
      await waitFor(() => ran.includes("after"), { timeoutMs: 15_000, what: "job after the failover" });
      expect(performance.now() - start).toBeLessThan(BOUND_MS);
    } finally {
      await loop.stop(500);
    }
  }, 30_000);
});

describe(`requests and readiness while the database is silent (${TOPOLOGY})`, () => {
  let app: TestApp;
  let link: Awaited<ReturnType<typeof openProxied>>;
  let headers: Record<string, string>;
  // its own, outside the per-test cleanup
  const own = { proxies: [] as TcpProxy[], opened: [] as Database[] };

  beforeAll(async () => {
    const tenant = await createTenant(t.database.db);
    const user = await createUser(t.database.db, tenant.id, { role: "owner" });
    link = await openProxied({}, own);
    app = await createTestApp({ database: link.database, env: { Authentication__SessionCacheSeconds: "0" } });
    headers = (await signIn(app, user, tenant.code)).headers;
  });

  afterAll(async () => {
    await app.close();
    await link.database.close(0.1);
    for (const proxy of own.proxies) await proxy.close();
  });

  test("a tenant read answers 503 problem JSON and readiness 503 within their bounds; both 200 after a failover", async () => {
    const first = await app.request("/api/tenant/users", { headers });
    expect(first.status, `${await first.clone().text()} ${app.logs.slice(-5).join("\n")}`).toBe(200);
    link.cut();
    const started = performance.now();
    const ready = await app.request("/api/health/ready");
    expect(ready.status).toBe(503);
    expect(performance.now() - started).toBeLessThan(1_500);
    const read = await withTimeout(app.request("/api/tenant/users", { headers }), BOUND_MS, "tenant read");
    expect(read.status).toBe(503);
    expect(read.headers.get("content-type")).toStartWith("application/problem+json");
    expect(read.headers.get("retry-after")).toBe("1");
    link.failover();
    await waitFor(async () => (await app.request("/api/health/ready")).status === 200, {
      timeoutMs: BOUND_MS,
      what: "readiness back",
    });
    const again = await withTimeout(
      app.request("/api/tenant/users", { headers }),
      BOUND_MS,
      "tenant read after",
    );
    expect(again.status).toBe(200);
  }, 30_000);
});
