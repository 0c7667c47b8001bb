import { cpSync, existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { type SQL, sql } from "drizzle-orm";
import { type PgDatabase, PgDialect, type PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { withTimeout } from "../runtime/with-timeout.ts";
import { observePgliteClient, observePostgresClient, type QueryObserver } from "../telemetry/db.ts";
import { lockDirectory } from "./pglite-lock.ts";
import * as schema from "./schema/index.ts";
import { registerScopedReader, registerScopedRunner } from "./tenant-scope.ts";

export type Schema = typeof schema;
/** The Drizzle database, whichever driver is behind it. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
/** Anything queries can run on: the database or an open transaction. */
export type Executor = Db | Tx;

export interface Database {
  db: Db;
  driver: "postgres" | "pglite";
  /** PGlite: the template this new data directory was copied from (src/db/pglite-template.ts). */
  createdFromTemplate?: string;
  /** Round trip to the server; rejects after `timeoutMs`. */
  ping(timeoutMs: number): Promise<void>;
  /**
   * Whether `listen` and `holdSharedLock` have a session to run on: false behind a transaction
   * pooler (`Database:PoolMode` = transaction) without a direct connection.
   */
  sessions: boolean;
  /** Pool mode of `db`: `transaction` behind a transaction pooler (docs/scaling.md). */
  poolMode: "session" | "transaction";
  /** Round trip over the direct (session) connection, when one is configured beside a pooler. */
  pingDirect?(timeoutMs: number): Promise<void>;
  /**
   * Subscribes to NOTIFY on a channel; resolves to an unsubscribe function. Throws without `sessions`.
   * `onResubscribed` runs each time the subscription is made again on a new connection after its
   * connection was lost: whatever was notified in between was missed.
   */
  listen(
    channel: string,
    onMessage: (payload: string) => void,
    onResubscribed?: () => void,
  ): Promise<() => Promise<void>>;
  /** Waits up to `timeoutSeconds` (default 5) for queries in flight, then closes. */
  close(timeoutSeconds?: number): Promise<void>;
  /** Times every statement from now on (spans, duration metric, slow-query log); undefined stops it. */
  setQueryObserver(observer: QueryObserver | undefined): void;
  /**
   * Takes a session-level shared advisory lock on a connection of its own (PostgreSQL only) and
   * holds it until the returned function releases it; null when an exclusive holder refuses it.
   */
  holdSharedLock?(key: bigint): Promise<HeldLock | null>;
  /**
   * Runs `work` with no answer timeout on any connection (PostgreSQL with `answerTimeoutSeconds`):
   * for statements that may rightly run longer, a migration at start-up.
   */
  withoutAnswerTimeout?<T>(work: () => Promise<T>): Promise<T>;
}

/** A session-level advisory lock on a connection of its own. */
export interface HeldLock {
  /** Whether the session still holds it (false once its connection was lost). */
  held(timeoutMs: number): Promise<boolean>;
  release(): Promise<void>;
}

export interface OpenDatabaseOptions {
  poolSize?: number;
  /** Seconds to wait for a connection before failing a query. */
  connectTimeoutSeconds?: number;
  /**
   * Seconds a statement written waits for the server's next byte before its connection is taken for
   * dead and closed (`Database:AnswerTimeoutSeconds`; 0 or unset: no bound). A network that drops
   * packets silently gives no other sign: see docs/runbooks/database-restart.md.
   */
  answerTimeoutSeconds?: number;
  /**
   * With `answerTimeoutSeconds`: how often the LISTEN connection, idle otherwise, runs a statement so a
   * silent loss of it is found (default LISTEN_HEARTBEAT_SECONDS).
   */
  listenHeartbeatSeconds?: number;
  applicationName?: string;
  /**
   * `transaction` when the URL goes through a transaction pooler: no named prepared statements,
   * and LISTEN and session locks only over `directUrl`.
   */
  poolMode?: "session" | "transaction";
  /** A direct (session) connection for LISTEN and session advisory locks; postgres:// only. */
  directUrl?: string;
  /**
   * PGlite only: a migrated data directory (src/db/pglite-template.ts) a new directory is copied
   * from instead of running initdb.
   */
  pgliteTemplate?: string;
}

/** Rows of a `db.execute` result: postgres.js returns an array, PGlite an object with `rows`. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}

export async function execute<T = Record<string, unknown>>(db: Executor, query: SQL): Promise<T[]> {
  return rowsOf<T>(await db.execute(query));
}

const dialect = new PgDialect({ casing: "snake_case" });

interface PreparingClient {
  unsafe(text: string, params: unknown[], options: { prepare: boolean }): PromiseLike<unknown>;
}

/**
 * `execute` as a named prepared statement when `db` is the postgres.js database itself: parsed and
 * described once per connection instead of on every call (drizzle's `execute` sends each
 * statement unnamed, a describe round trip first). For statements a loop repeats with the same
 * text; on PGlite or inside a transaction it is `execute`. Behind a transaction pooler the client
 * is built with `prepare: false`, which postgres.js lets win over a query's own `prepare`.
 */
export async function executePrepared<T = Record<string, unknown>>(db: Executor, query: SQL): Promise<T[]> {
  const client = (db as { $client?: Partial<PreparingClient> }).$client;
  if (typeof client?.unsafe !== "function") return execute<T>(db, query);
  const { sql: text, params } = dialect.sqlToQuery(query);
  return rowsOf<T>(await (client as PreparingClient).unsafe(text, params, { prepare: true }));
}

/**
 * `shared_buffers` of an embedded database: PostgreSQL's 128 MB default is resident in the process
 * (PGlite's memory is the process's); 16 MB holds a development data set and saves ~130 MB.
 */
const PGLITE_START_PARAMS = ["-c", "shared_buffers=16MB"];

/** Whether `dir` holds a PostgreSQL data directory. */
export function isDataDir(dir: string): boolean {
  return existsSync(join(dir, "PG_VERSION"));
}

/**
 * Copies a migrated template (src/db/pglite-template.ts) into `dataDir` when `dataDir` holds no
 * database yet and the template exists; other files in `dataDir` (the quickstart's keys) stay.
 */
function copyTemplate(template: string, dataDir: string): boolean {
  if (isDataDir(dataDir) || !isDataDir(template)) return false;
  cpSync(template, dataDir, { recursive: true });
  return true;
}

async function openPglite(url: string, options: OpenDatabaseOptions): Promise<Database> {
  const location = url.slice("pglite:".length);
  const dataDir = location === "memory:" || location === "" ? undefined : location;
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  // one process per directory: a second PGlite on the same files corrupts them
  const unlock = dataDir ? lockDirectory(resolve(dataDir)) : () => {};
  let client: PGlite;
  let fromTemplate = false;
  try {
    fromTemplate = Boolean(
      dataDir && options.pgliteTemplate && copyTemplate(options.pgliteTemplate, dataDir),
    );
    client = new PGlite(dataDir, {
      startParams: [...PGlite.defaultStartParams, ...PGLITE_START_PARAMS],
    });
    await client.waitReady;
  } catch (error) {
    unlock();
    throw error;
  }
  let observer: QueryObserver | undefined;
  observePgliteClient(client, () => observer);
  const db = drizzlePglite(client, { schema, casing: "snake_case" }) as unknown as Db;
  return {
    db,
    driver: "pglite",
    ...(fromTemplate ? { createdFromTemplate: options.pgliteTemplate } : {}),
    sessions: true,
    poolMode: "session",
    ping: async (timeoutMs) => {
      await withTimeout(client.query("select 1"), timeoutMs, "database ping");
    },
    listen: async (channel, onMessage) => {
      const unsubscribe = await client.listen(channel, onMessage);
      return async () => unsubscribe();
    },
    close: async () => {
      if (!client.closed) await client.close();
      unlock();
    },
    setQueryObserver: (next) => {
      observer = next;
    },
  };
}

/**
 * The longest a connection waits before it reconnects after its socket failed, in seconds: the
 * job loop's own backoff after a failed statement (docs/decisions.md, "A connection waits at most a
 * second to reconnect").
 */
export const RECONNECT_BACKOFF_MAX_SECONDS = 1;

/**
 * Seconds a postgres.js connection waits, after its socket failed, before it connects again for the
 * next statement given to it; `failures` is the client's count of failed sockets since one last
 * opened (shared by the pool's connections and its LISTEN connection). postgres.js's own curve
 * (3^n / 100 s, jittered to half to all of it) with its cap cut from 20 s to
 * RECONNECT_BACKOFF_MAX_SECONDS: with the default, the connections that failed after the sixth
 * socket failure of an outage (a pool of 4 cut and three statements tried meanwhile) waited 3.6 to
 * 20 s after the database was back, and held whatever statement was handed to them for that long.
 */
export function reconnectBackoff(failures: number, random: () => number = Math.random): number {
  return (0.5 + random() / 2) * Math.min(3 ** failures / 100, RECONNECT_BACKOFF_MAX_SECONDS);
}

/**
 * Seconds between the idle LISTEN connection's heartbeats: with the answer timeout, a LISTEN lost to a
 * silent network is found and made again within this plus `Database:AnswerTimeoutSeconds`.
 */
export const LISTEN_HEARTBEAT_SECONDS = 10;

/** The answer timeout option of the patched postgres.js (patches/postgres@3.4.9.patch, answerCheck). */
interface AnswerTimeoutOption {
  answer_timeout: () => number;
}

function openPostgres(url: string, options: OpenDatabaseOptions): Database {
  const poolMode = options.poolMode ?? "session";
  const connection = { application_name: options.applicationName ?? "plinth" };
  let unbounded = 0;
  const answerTimeout: AnswerTimeoutOption = {
    answer_timeout: () => (unbounded > 0 ? 0 : (options.answerTimeoutSeconds ?? 0)),
  };
  const client = postgres(url, {
    ...answerTimeout,
    max: options.poolSize ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 5,
    idle_timeout: 60,
    max_lifetime: 60 * 30,
    backoff: (failures) => reconnectBackoff(failures),
    onnotice: () => {},
    // a transaction pooler hands each statement to any server connection: a named prepared
    // statement made on one is unknown on the next (unnamed statements are parsed every time)
    prepare: poolMode !== "transaction",
    connection,
  });
  // LISTEN and session advisory locks need one server session for their whole life: a connection
  // of their own, direct to PostgreSQL, when the pool goes through a transaction pooler
  const direct = options.directUrl
    ? postgres(options.directUrl, {
        ...answerTimeout,
        max: 2,
        connect_timeout: options.connectTimeoutSeconds ?? 5,
        idle_timeout: 0,
        max_lifetime: null,
        backoff: (failures) => reconnectBackoff(failures),
        onnotice: () => {},
        connection: { application_name: `${connection.application_name}-direct` },
      })
    : undefined;
  const session = direct ?? (poolMode === "session" ? client : undefined);
  const heartbeat = session && options.answerTimeoutSeconds ? listenHeartbeat(session, options) : undefined;
  let observer: QueryObserver | undefined;
  observePostgresClient(client, () => observer);
  const db = drizzlePostgres(client, { schema, casing: "snake_case" }) as unknown as Db;
  const scopedRunner = registerScopedRunner(db, client, (shim) =>
    observePostgresClient(shim, () => observer),
  );
  registerScopedReader(db, client);
  const database: Database = {
    db,
    driver: "postgres",
    sessions: session !== undefined,
    poolMode,
    ping: async (timeoutMs) => {
      await withTimeout(client`select 1`.execute(), timeoutMs, "database ping");
    },
    listen: async (channel, onMessage, onResubscribed) => {
      if (!session)
        throw new Error("LISTEN needs a session: set DATABASE_DIRECT_URL beside a transaction pooler");
      let subscribed = false;
      // postgres.js calls it at every LISTEN of the channel, the first and each after a lost connection
      const onListen = () => {
        if (subscribed) onResubscribed?.();
        subscribed = true;
      };
      const subscription = await session.listen(channel, onMessage, onListen);
      heartbeat?.start();
      return () => subscription.unlisten();
    },
    close: async (timeoutSeconds = 5) => {
      heartbeat?.stop();
      // a read-only transaction's connection is released once its COMMIT is answered: a close
      // before that waited out the whole timeout (src/db/tenant-scope.ts, registerScopedRunner)
      const started = performance.now();
      await scopedRunner.settled(timeoutSeconds * 1000);
      const left = Math.max(0, timeoutSeconds - (performance.now() - started) / 1000);
      await Promise.all([client.end({ timeout: left }), direct?.end({ timeout: left })]);
    },
    setQueryObserver: (next) => {
      observer = next;
    },
  };
  if (direct) {
    database.pingDirect = async (timeoutMs) => {
      await withTimeout(direct`select 1`.execute(), timeoutMs, "direct database ping");
    };
  }
  if (session) database.holdSharedLock = (key) => holdSharedLock(session, key);
  if (options.answerTimeoutSeconds)
    database.withoutAnswerTimeout = async (work) => {
      unbounded++;
      try {
        return await work();
      } finally {
        unbounded--;
      }
    };
  return database;
}

/**
 * A statement every `listenHeartbeatSeconds` on the LISTEN connection (postgres.js's own, one per
 * client, made at the first `listen`): idle, nothing else would find it lost to a network that drops
 * packets silently. With the answer timeout the heartbeat's statement closes a dead connection, and
 * postgres.js then listens again on a new one (onResubscribed).
 */
function listenHeartbeat(
  session: postgres.Sql,
  options: OpenDatabaseOptions,
): { start(): void; stop(): void } {
  let timer: ReturnType<typeof setInterval> | undefined;
  const beat = () => {
    const listening = (session.listen as unknown as { sql?: postgres.Sql }).sql;
    if (listening) listening`select 1`.execute().catch(() => {});
  };
  return {
    start: () => {
      if (timer) return;
      timer = setInterval(beat, (options.listenHeartbeatSeconds ?? LISTEN_HEARTBEAT_SECONDS) * 1000);
      timer.unref?.();
    },
    stop: () => clearInterval(timer),
  };
}

async function holdSharedLock(client: postgres.Sql, key: bigint): Promise<HeldLock | null> {
  const k = key.toString();
  const connection = await client.reserve();
  try {
    const [row] = await connection<{ ok: boolean }[]>`select pg_try_advisory_lock_shared(${k}::bigint) as ok`;
    if (!row?.ok) {
      connection.release();
      return null;
    }
  } catch (error) {
    connection.release();
    throw error;
  }
  let released = false;
  return {
    held: async (timeoutMs) => {
      try {
        const [row] = await withTimeout(
          connection<{ n: number }[]>`select count(*)::int as n from pg_locks
            where pid = pg_backend_pid() and locktype = 'advisory' and mode = 'ShareLock' and granted
              and objsubid = 1 and (classid::bigint << 32) + objid::bigint = ${k}::bigint`.execute(),
          timeoutMs,
          "lock check",
        );
        return (row?.n ?? 0) > 0;
      } catch {
        return false;
      }
    },
    release: async () => {
      if (released) return;
      released = true;
      // a lost connection has lost the lock with it; never wait on a dead one
      await withTimeout(
        connection`select pg_advisory_unlock_shared(${k}::bigint)`.execute(),
        1_000,
        "unlock",
      ).catch(() => {});
      connection.release();
    },
  };
}

/** Opens PostgreSQL (`postgres://`, `postgresql://`) or embedded PGlite (`pglite:memory:`, `pglite:<dir>`). */
export async function openDatabase(url: string, options: OpenDatabaseOptions = {}): Promise<Database> {
  if (url.startsWith("pglite:")) return openPglite(url, options);
  if (/^postgres(ql)?:\/\//.test(url)) return openPostgres(url, options);
  throw new Error("database URL must start with postgres://, postgresql:// or pglite:");
}

export { sql };
