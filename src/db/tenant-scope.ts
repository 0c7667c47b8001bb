/**
 * Row-level security's context, set per transaction without a round trip of its own
 * (docs/decisions.md, "Row-level security: the context rides in front of the first statement").
 *
 * Every table with `tenant_id` admits a row only under its tenant's `plinth.tenant_id` or on the named
 * platform path (`plinth.platform` = `on`); both are set with `set_config(…, true)`, so they end with
 * the transaction and never reach the next user of a pooled connection (PgBouncer in transaction
 * mode included). On PostgreSQL a scoped transaction reserves a pool connection and writes
 * `begin; select set_config(…)` as one simple-protocol message with the work's statements pipelined
 * right behind it: postgres.js sends a statement without waiting for the one before unless it must
 * describe it first. A transaction that only ran `select`s is committed without the caller waiting
 * (there is nothing to lose); the connection goes back to the pool when COMMIT is answered. The work
 * runs on a lane, a Drizzle transaction reused from a free list, so statements built once per executor
 * (src/db/prepared.ts) stay built.
 */
import { type SQL, sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { PostgresJsSession, PostgresJsTransaction } from "drizzle-orm/postgres-js";
import type postgres from "postgres";
import { isUuid } from "../uuid.ts";
import type { Db, Tx } from "./client.ts";
import { describeDatabaseFailure } from "./database-failure.ts";

/**
 * Whose rows a scoped transaction sees: one tenant's, or every row on the named platform path
 * (`snapshot`: read only, repeatable read, so its reads across tenants agree; operation.ts,
 * withPlatformSnapshot).
 */
export type DatabaseScope = { tenantId: string } | { platform: true; snapshot?: true };

/** `write`: COMMIT is awaited; `read`: awaited only when the work ran something other than `select`. */
export type ScopeMode = "write" | "read";

export type ScopedRunner = <T>(
  scope: DatabaseScope,
  work: (tx: Tx) => Promise<T>,
  mode: ScopeMode,
) => Promise<T>;

const READ = /^\s*select\b/i;

/**
 * The context as a parameterised statement, for drivers without the pipelined path (PGlite). A
 * tenant id that is not a uuid names no tenant: no context, so no tenant row (the work's own query
 * then refuses the id as before, e.g. a 404 for a malformed id in a path).
 */
export function scopeSetting(scope: DatabaseScope): SQL {
  if ("platform" in scope) return sql`select set_config('plinth.platform', 'on', true)`;
  return isUuid(scope.tenantId)
    ? sql`select set_config('plinth.tenant_id', ${scope.tenantId.toLowerCase()}, true)`
    : sql`select 1`;
}

/**
 * BEGIN and the context as one simple-protocol message. The tenant id is written into the text, not
 * sent as a parameter: a parameter would make postgres.js wait for a describe before the work's first
 * statement (every time behind a transaction pooler, where nothing stays prepared). It is checked to
 * be a canonical uuid first, so nothing but hex digits and dashes reaches the text; anything else
 * sets no context (see scopeSetting).
 */
export function scopeOpening(scope: DatabaseScope): string {
  if ("platform" in scope)
    return `begin${scope.snapshot ? " isolation level repeatable read, read only" : ""}; select set_config('plinth.platform', 'on', true)`;
  if (!isUuid(scope.tenantId)) return "begin";
  return `begin; select set_config('plinth.tenant_id', '${scope.tenantId.toLowerCase()}', true)`;
}

// biome-ignore lint/suspicious/noExplicitAny: the shim stands in for postgres.js's Sql, whose types are generic over rows we never name
type Loose = any;

interface Lane {
  tx: Tx;
  /** What the lane's Drizzle session sends through: the reserved connection, observed. */
  shim: Loose;
  connection: postgres.ReservedSql | undefined;
  wrote: boolean;
  savepoints: number;
}

const runners = new WeakMap<Db, ScopedRunner>();

/** Runs `work` on an executor whose every statement carries `scope` (src/db/operation.ts, withDatabase). */
export type ScopedReader = <T>(scope: DatabaseScope, work: (db: Tx) => Promise<T>) => Promise<T>;

const readers = new WeakMap<Db, ScopedReader>();

/** The per-statement reader of `db` (PostgreSQL through postgres.js), when it has one. */
export function scopedReaderOf(db: unknown): ScopedReader | undefined {
  return readers.get(db as Db);
}

/** One protocol message: its type byte, its length (itself included), its body. */
function protocolMessage(type: string, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const head = Buffer.alloc(5);
  head.write(type, 0, "latin1");
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

function int16(value: number): Buffer {
  const buffer = Buffer.alloc(2);
  buffer.writeInt16BE(value);
  return buffer;
}

function int32(value: number): Buffer {
  const buffer = Buffer.alloc(4);
  buffer.writeInt32BE(value);
  return buffer;
}

const NUL = Buffer.from([0]);
/**
 * Sets a setting for the rest of the implicit transaction and returns no row (set_config returns the
 * value it set, never null), so postgres.js has no row to place: only its CommandComplete, which the
 * patched driver passes by (patches/postgres@3.4.9.patch).
 */
const SET_LOCAL = (name: "plinth.tenant_id" | "plinth.platform") =>
  Buffer.from(`select where set_config('${name}', $1, true) is null\0`);

/** What the patched driver writes ahead of a statement (patches/postgres@3.4.9.patch). */
export interface Prelude {
  /** Bind and Execute (with the unnamed statement's Parse in front when there is no `name`). */
  run: Buffer;
  /** The named statement's Parse, written once per connection. */
  parse?: Buffer;
  name?: string;
}

/**
 * The scope as extended-protocol messages (Parse, Bind, Execute, no Sync), written ahead of a
 * statement's own messages: the two run in one implicit transaction, ended by the statement's Sync,
 * so the setting holds for that statement only and never outlives it (on a pooled connection behind
 * PgBouncer in transaction mode as on a direct one). The value is a bound parameter, never part of
 * the text. `named`: a statement prepared once per connection (a session-mode pool); else the unnamed
 * statement, parsed every time (behind a transaction pooler nothing stays prepared). A tenant id
 * that is not a uuid sets nothing (no tenant row).
 */
export function scopePrelude(scope: DatabaseScope, named: boolean): Prelude | undefined {
  const [setting, value] =
    "platform" in scope
      ? (["plinth.platform", "on"] as const)
      : isUuid(scope.tenantId)
        ? (["plinth.tenant_id", scope.tenantId.toLowerCase()] as const)
        : [undefined, undefined];
  if (!setting) return undefined;
  const name = named ? `plinth_scope_${setting.slice("plinth.".length)}` : "";
  const statement = Buffer.from(`${name}\0`);
  const parse = protocolMessage("P", statement, SET_LOCAL(setting), int16(1), int32(0));
  const bytes = Buffer.from(value, "latin1");
  const bind = protocolMessage("B", NUL, statement, int16(0), int16(1), int32(bytes.length), bytes, int16(0));
  const execute = protocolMessage("E", NUL, int32(0));
  return named
    ? { run: Buffer.concat([bind, execute]), parse, name }
    : { run: Buffer.concat([parse, bind, execute]) };
}

/** Preludes of the tenants seen lately, per pool: a request builds none of its own. */
const PRELUDES_KEPT = 4096;

interface ReadLane {
  db: Tx;
  /** The scope's prelude while a `work` runs on the lane; `null` when the lane is free. */
  prelude: Prelude | undefined | null;
}

/**
 * Builds `db`'s per-statement reader over its postgres.js client: each statement the work runs goes
 * to the pool as usual, its scope's prelude ahead of it in the same message (no BEGIN, no COMMIT, no
 * reserved connection; docs/decisions.md, "the context rides in each statement"). The work runs on a
 * lane, a Drizzle executor kept on a free list, so statements built once per executor stay built.
 */
export function registerScopedReader(db: Db, client: postgres.Sql): void {
  const dialect = new PgDialect({ casing: "snake_case" });
  const { fullSchema, schema, tableNamesMap } = (db as Loose)._;
  const relational = { fullSchema, schema, tableNamesMap };
  const free: ReadLane[] = [];
  // named preludes where statements stay prepared (not behind a transaction pooler)
  const named = client.options.prepare !== false;
  const preludes = new Map<string, Prelude | undefined>();
  const preludeOf = (scope: DatabaseScope): Prelude | undefined => {
    const key = "platform" in scope ? "" : scope.tenantId;
    let prelude = preludes.get(key);
    if (prelude === undefined && !preludes.has(key)) {
      prelude = scopePrelude(scope, named);
      if (preludes.size >= PRELUDES_KEPT) preludes.clear();
      preludes.set(key, prelude);
    }
    return prelude;
  };

  const newLane = (): ReadLane => {
    const lane = { prelude: null } as ReadLane;
    const shim: Loose = {
      options: client.options,
      // through the pool's own `unsafe` (observed there: spans, the duration metric); extended protocol
      // even without parameters, the prelude's carrier
      unsafe: (text: string, params: unknown[] = [], options: Record<string, unknown> = {}) => {
        const prelude = lane.prelude;
        if (prelude === null) throw new Error("a scoped executor was used after its work ended");
        if (prelude === undefined) return (client.unsafe as Loose)(text, params, options);
        return (client.unsafe as Loose)(text, params, { ...options, simple: false, prelude });
      },
      savepoint: () => {
        throw new Error("withDatabase runs statements one by one: open a transaction with withTransaction");
      },
    };
    const session = new PostgresJsSession(shim, dialect, relational, {});
    lane.db = new PostgresJsTransaction(dialect, session, relational) as unknown as Tx;
    return lane;
  };

  const read: ScopedReader = async (scope, work) => {
    const lane = free.pop() ?? newLane();
    lane.prelude = preludeOf(scope);
    try {
      return await work(lane.db);
    } finally {
      lane.prelude = null;
      free.push(lane);
    }
  };
  readers.set(db, read);
}

/**
 * Whether `error` means the reserved connection is gone (the server cut it: a restart, a failover,
 * pg_terminate_backend, a pooler's restart; or its socket failed). Its socket closes, and postgres.js
 * puts it among its closed connections by itself (reconnected on demand); released, the dead one was
 * handed out again (docs/decisions.md, "A cut connection fails fast").
 */
function lost(error: unknown): boolean {
  return describeDatabaseFailure(error).class === "connection lost";
}

/** After a failed statement: the connection goes back to the pool unless it was lost. */
function settle(connection: postgres.ReservedSql, error: unknown): void {
  if (!lost(error)) connection.release();
}

/** The pipelined runner of `db` (PostgreSQL through postgres.js), when it has one. */
export function scopedRunnerOf(db: unknown): ScopedRunner | undefined {
  return runners.get(db as Db);
}

/**
 * Builds `db`'s pipelined runner over its postgres.js client. `observe` gets each lane's client shim
 * once, so statements of scoped transactions are timed like the pool's (src/telemetry/db.ts).
 * Returns what the pool's close awaits first: the COMMITs of read-only transactions, which return
 * before their answer and release their connection after it. postgres.js ends a connection still
 * reserved only when its close timeout destroys it, so a close in that moment (a CLI's, right after
 * its last read) waited out the whole timeout.
 */
export function registerScopedRunner(
  db: Db,
  client: postgres.Sql,
  observe: (shim: Loose) => void,
): { settled(timeoutMs: number): Promise<void> } {
  const dialect = new PgDialect({ casing: "snake_case" });
  const { fullSchema, schema, tableNamesMap } = (db as Loose)._;
  const relational = { fullSchema, schema, tableNamesMap };
  const free: Lane[] = [];
  /** Read-only transactions' COMMITs not answered yet (each releases its connection when it is). */
  const committing = new Set<Promise<void>>();

  const newLane = (): Lane => {
    const lane = { connection: undefined, wrote: false, savepoints: 0 } as unknown as Lane;
    const shim: Loose = {
      options: client.options,
      unsafe: (text: string, ...rest: unknown[]) => {
        const connection = lane.connection;
        if (!connection)
          throw new Error("a scoped transaction's executor was used after the transaction ended");
        if (!lane.wrote && !READ.test(text)) lane.wrote = true;
        return (connection.unsafe as Loose)(text, ...rest);
      },
      // Drizzle's nested `tx.transaction` on this lane
      savepoint: async (fn: (sql: Loose) => Promise<unknown>) => {
        const name = `s${lane.savepoints++}`;
        await shim.unsafe(`savepoint ${name}`);
        try {
          const result = await fn(shim);
          await shim.unsafe(`release savepoint ${name}`);
          return result;
        } catch (error) {
          await shim.unsafe(`rollback to savepoint ${name}`);
          throw error;
        }
      },
    };
    observe(shim);
    lane.shim = shim;
    const session = new PostgresJsSession(shim, dialect, relational, {});
    lane.tx = new PostgresJsTransaction(dialect, session, relational) as unknown as Tx;
    return lane;
  };

  const run: ScopedRunner = async (scope, work, mode) => {
    const opening = scopeOpening(scope);
    const connection = await client.reserve();
    const lane = free.pop() ?? newLane();
    lane.connection = connection;
    lane.wrote = false;
    lane.savepoints = 0;
    // through the lane, so the statement is observed like any other (spans, the duration metric)
    const begun = lane.shim.unsafe(opening).execute();
    lane.wrote = false;
    // a failure shows in the work's first statement (the transaction is aborted) and is rethrown below
    begun.catch(() => {});
    let result: Awaited<ReturnType<typeof work>>;
    try {
      result = await work(lane.tx);
      await begun;
    } catch (error) {
      lane.connection = undefined;
      free.push(lane);
      // the work's error may come from elsewhere (another connection): the reserved one's own answer
      // to ROLLBACK decides whether it goes back to the pool. One known closed refuses it unwritten
      // (patches/postgres@3.4.9.patch, reserve); one dying under it fails it when its socket closes.
      await connection
        .unsafe("rollback")
        .execute()
        .then(
          () => connection.release(),
          (rollbackError: unknown) => settle(connection, rollbackError),
        );
      throw error;
    }
    lane.connection = undefined;
    const wrote = lane.wrote;
    free.push(lane);
    const committed = connection.unsafe("commit").execute();
    if (mode === "write" || wrote) {
      try {
        await committed;
      } catch (error) {
        settle(connection, error);
        throw error;
      }
      connection.release();
    } else {
      // only selects ran: the answer is already right; the connection returns once COMMIT is answered
      const released = committed.then(
        () => connection.release(),
        (error: unknown) => settle(connection, error),
      );
      committing.add(released);
      void released.then(() => committing.delete(released));
    }
    return result;
  };
  runners.set(db, run);
  return {
    // bounded: a COMMIT never answered (a connection gone silent) is left to the close timeout
    settled: async (timeoutMs) => {
      if (committing.size === 0) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.all(committing),
        new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
    },
  };
}
