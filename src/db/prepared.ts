import type { Executor } from "./client.ts";

/**
 * A statement on a hot path, built once per executor (the pool's `db`, or a transaction) and then
 * run with its placeholders (`sql.placeholder`): Drizzle otherwise rebuilds the SQL text from the
 * query builder on every call, which costs more CPU than the round trip it sends (measured on the
 * tenant users page: ~2.5× a postgres.js query of the same SQL, ~1× once prepared; docs/performance.md).
 * A transaction is a new executor each time, so inside one the statement is built per transaction.
 */
export function preparedPerExecutor<P>(build: (db: Executor) => P): (db: Executor) => P {
  const built = new WeakMap<Executor, P>();
  return (db) => {
    let statement = built.get(db);
    if (statement === undefined) {
      statement = build(db);
      built.set(db, statement);
    }
    return statement;
  };
}
