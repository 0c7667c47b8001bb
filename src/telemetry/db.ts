import { context, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { Logger } from "./logger.ts";
import type { Telemetry } from "./otel.ts";

/** Sees every statement the driver runs: `run` executes it; the observer times it. */
export interface QueryObserver {
  observe<T>(statement: string, run: () => Promise<T>): Promise<T>;
}

const MAX_STATEMENT = 1_000;

/**
 * The statement's shape for logs and spans: parameters are `$n` placeholders already (Drizzle
 * sends values separately); string and numeric literals written into the SQL are replaced too,
 * whitespace is collapsed and the text is cut to 1,000 characters.
 */
export function statementShape(statement: string): string {
  const shape = statement
    .replace(/'(?:[^']|'')*'/g, "?")
    .replace(/(?<![\w$])-?\d+(?:\.\d+)?(?![\w])/g, "?")
    .replace(/\s+/g, " ")
    .trim();
  return shape.length > MAX_STATEMENT ? `${shape.slice(0, MAX_STATEMENT)}…` : shape;
}

/** `select`, `insert`, …; for a CTE the statement the CTE feeds. */
export function statementOperation(statement: string): string {
  const words = statement.trimStart().slice(0, 4_000).toLowerCase();
  const first = /^[a-z]+/.exec(words)?.[0] ?? "unknown";
  if (first !== "with") return first;
  // the last top-level verb after the CTEs: good enough for a metric label
  const verbs = words.match(/\)\s*(select|insert|update|delete)\b/g);
  const last = verbs?.[verbs.length - 1];
  return last ? last.replace(/^\)\s*/, "") : "with";
}

export interface QueryObserverOptions {
  telemetry: Telemetry;
  logger: Logger;
  /** `Database:SlowQueryMilliseconds`: statements at least this slow are logged at warn. */
  slowQueryMs: number;
  now?: () => number;
}

/**
 * Spans (CLIENT, operation and statement shape, never values), the duration metric for every
 * statement and a warn line for slow ones. With telemetry off only the clock reads remain.
 */
export function createQueryObserver(options: QueryObserverOptions): QueryObserver {
  const { telemetry, logger, slowQueryMs } = options;
  const now = options.now ?? (() => performance.now());
  const { instruments } = telemetry;
  return {
    async observe<T>(statement: string, run: () => Promise<T>): Promise<T> {
      const started = now();
      // parsed only when something uses it: with telemetry off, fast statements cost two clock reads
      const operation = telemetry.enabled ? statementOperation(statement) : "";
      const span = telemetry.enabled
        ? telemetry.tracer.startSpan(
            `db ${operation}`,
            {
              kind: SpanKind.CLIENT,
              attributes: {
                "db.system.name": "postgresql",
                "db.operation.name": operation,
                "db.query.text": statementShape(statement),
              },
            },
            context.active(),
          )
        : undefined;
      let outcome = "ok";
      if (telemetry.enabled) instruments.dbInFlight.add(1);
      try {
        return await run();
      } catch (error) {
        outcome = "error";
        const code = (error as { code?: unknown })?.code;
        span?.setStatus({ code: SpanStatusCode.ERROR });
        if (typeof code === "string") span?.setAttribute("db.response.status_code", code);
        throw error;
      } finally {
        span?.end();
        const durationMs = now() - started;
        if (telemetry.enabled) instruments.dbInFlight.add(-1);
        if (telemetry.enabled)
          instruments.dbDuration.record(durationMs / 1000, { "db.operation.name": operation, outcome });
        if (durationMs >= slowQueryMs) {
          if (telemetry.enabled) instruments.dbSlowQueries.add(1, { "db.operation.name": operation });
          logger.warn("slow query", {
            operation: operation || statementOperation(statement),
            statement: statementShape(statement),
            durationMs: Math.round(durationMs * 100) / 100,
            thresholdMs: slowQueryMs,
            outcome,
          });
        }
      }
    },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: postgres.js's Sql and PendingQuery types are generic over row shapes we never name
type Loose = any;

/**
 * Routes every `unsafe` statement of a postgres.js client (what Drizzle sends, transactions and
 * savepoints included) through the observer returned by `current()`; with none, it is untouched.
 */
export function observePostgresClient(sql: Loose, current: () => QueryObserver | undefined): void {
  const unsafe = sql.unsafe;
  sql.unsafe = (...args: unknown[]) => {
    const query = unsafe(...args);
    const observer = current();
    const statement = args[0];
    if (!observer || typeof statement !== "string") return query;
    const then = query.then.bind(query);
    let observed: Promise<unknown> | undefined;
    // biome-ignore lint/suspicious/noThenProperty: the pending query IS a thenable; timing starts when it is awaited
    query.then = (onFulfilled?: Loose, onRejected?: Loose) => {
      observed ??= observer.observe(statement, () => new Promise((resolve, reject) => then(resolve, reject)));
      return observed.then(onFulfilled, onRejected);
    };
    return query;
  };
  if (typeof sql.begin === "function") {
    const begin = sql.begin;
    sql.begin = (...args: unknown[]) => {
      const fn = args.pop() as (tx: Loose) => unknown;
      return begin(...args, (tx: Loose) => {
        observeTransaction(tx, current);
        return fn(tx);
      });
    };
  }
}

function observeTransaction(tx: Loose, current: () => QueryObserver | undefined): void {
  observePostgresClient(tx, current);
  const savepoint = tx.savepoint;
  if (typeof savepoint !== "function") return;
  tx.savepoint = (...args: unknown[]) => {
    const fn = args.pop() as (inner: Loose) => unknown;
    return savepoint(...args, (inner: Loose) => {
      observeTransaction(inner, current);
      return fn(inner);
    });
  };
}

/** The same for PGlite: `query` on the client and inside transactions. */
export function observePgliteClient(client: Loose, current: () => QueryObserver | undefined): void {
  const wrap = (target: Loose) => {
    const query = target.query.bind(target);
    target.query = (statement: string, ...rest: unknown[]) => {
      const observer = current();
      return observer
        ? observer.observe(statement, () => query(statement, ...rest))
        : query(statement, ...rest);
    };
  };
  wrap(client);
  const transaction = client.transaction.bind(client);
  client.transaction = (fn: (tx: Loose) => unknown) =>
    transaction((tx: Loose) => {
      wrap(tx);
      return fn(tx);
    });
}
