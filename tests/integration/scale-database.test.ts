import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import { SERVING_LOCK, servingLockHolders } from "../../src/db/migrator.ts";
import { createTestApp, type TestApp, useTestDatabase } from "../helpers/app.ts";
import { databaseUrl, POOLER_URL } from "../helpers/database.ts";
import { TcpProxy } from "../helpers/tcp-proxy.ts";

// The database behind PgBouncer in transaction mode (scripts/scaled-services.sh, 127.0.0.1:6432):
// what goes through the pooler, what over the direct connection, and what readiness reports.

const t = useTestDatabase();
const opened: Database[] = [];
const pooled = () => databaseUrl(t.name, POOLER_URL);
afterAll(async () => {
  for (const database of opened) await database.close(0.1);
});

async function open(options: { direct?: string } = {}): Promise<Database> {
  const database = await openDatabase(pooled(), {
    poolSize: 4,
    poolMode: "transaction",
    ...(options.direct ? { directUrl: options.direct } : {}),
  });
  opened.push(database);
  return database;
}

describe("through PgBouncer in transaction mode", () => {
  test("statements and transactions work with unnamed statements, many at once", async () => {
    const database = await open();
    expect(database.poolMode).toBe("transaction");
    // the same statement shapes again and again on every pool connection: named prepared
    // statements would be looked up on server connections that never saw them
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        i % 2 === 0
          ? execute<{ n: number }>(database.db, sql`select ${i}::int as n`)
          : database.db.transaction(async (tx) => execute<{ n: number }>(tx, sql`select ${i}::int as n`)),
      ),
    );
    expect(results.map((rows) => rows[0]?.n)).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });

  test("without a direct URL: no sessions, so no LISTEN and no serving lock", async () => {
    const database = await open();
    expect(database.sessions).toBe(false);
    expect(database.holdSharedLock).toBeUndefined();
    expect(database.pingDirect).toBeUndefined();
    await expect(database.listen("plinth_jobs", () => {})).rejects.toThrow(/DATABASE_DIRECT_URL/);
  });

  test("with the direct URL: NOTIFY sent through the pooler reaches LISTEN on the direct connection", async () => {
    const database = await open({ direct: databaseUrl(t.name) });
    expect(database.sessions).toBe(true);
    const heard: string[] = [];
    const unlisten = await database.listen("plinth_scale_test", (payload) => heard.push(payload));
    await database.db.transaction(async (tx) => {
      await execute(tx, sql`select pg_notify('plinth_scale_test', 'from-the-pool')`);
    });
    for (let i = 0; i < 100 && heard.length === 0; i++) await Bun.sleep(20);
    expect(heard).toEqual(["from-the-pool"]);
    await unlisten();
  });

  test("the serving lock is a session lock on the direct connection, visible to the migrator", async () => {
    const database = await open({ direct: databaseUrl(t.name) });
    const before = await servingLockHolders(t.database.db);
    const lock = await database.holdSharedLock?.(SERVING_LOCK);
    expect(lock).toBeTruthy();
    expect(await lock?.held(1_000)).toBe(true);
    expect(await servingLockHolders(t.database.db)).toBe(before + 1);
    const [row] = await execute<{ name: string }>(
      t.database.db,
      sql`select application_name as name from pg_stat_activity a join pg_locks l on l.pid = a.pid
          where l.locktype = 'advisory' and l.granted and (l.classid::bigint << 32) + l.objid::bigint = ${SERVING_LOCK.toString()}::bigint
          and a.datname = current_database()`,
    );
    expect(row?.name).toBe("plinth-direct");
    await lock?.release();
    expect(await servingLockHolders(t.database.db)).toBe(before);
  });
});

describe("readiness checks both connections", () => {
  let proxy: TcpProxy;
  let app: TestApp;
  beforeAll(async () => {
    proxy = await TcpProxy.start({ host: "127.0.0.1", port: 5432 });
    const direct = new URL(databaseUrl(t.name));
    direct.port = String(proxy.port);
    const database = await openDatabase(pooled(), {
      poolSize: 2,
      poolMode: "transaction",
      directUrl: direct.toString(),
      connectTimeoutSeconds: 1,
    });
    opened.push(database);
    app = await createTestApp({ database });
  });
  afterAll(async () => {
    proxy.up();
    await app.close();
    await proxy.close();
  });

  test("the direct connection has its own check; its loss alone makes readiness 503, its return 200", async () => {
    const ready = async () => {
      const response = await app.request("/api/health/ready");
      return {
        status: response.status,
        body: (await response.json()) as { checks: Record<string, { status: string }[]> },
      };
    };
    const up = await ready();
    expect(up.status).toBe(200);
    expect(up.body.checks["database-direct:responseTime"]?.[0]?.status).toBe("pass");
    expect(up.body.checks["database:responseTime"]?.[0]?.status).toBe("pass");

    proxy.down();
    let down = await ready();
    for (let i = 0; i < 50 && down.status !== 503; i++) {
      await Bun.sleep(100);
      down = await ready();
    }
    expect(down.status).toBe(503);
    expect(down.body.checks["database-direct:responseTime"]?.[0]?.status).toBe("fail");
    expect(down.body.checks["database:responseTime"]?.[0]?.status).toBe("pass");

    proxy.up();
    let back = await ready();
    for (let i = 0; i < 50 && back.status !== 200; i++) {
      await Bun.sleep(100);
      back = await ready();
    }
    expect(back.status).toBe(200);
  }, 30_000);
});
