/**
 * How a domain operation reaches the database: through the ctx it was given, never through
 * `deps.database` directly. One place decides what a unit of work is, so a caller's transaction is
 * joined (an operation called inside another's) and per-transaction settings have one home.
 */
import type { Ctx } from "../context.ts";
import type { Database, Executor, Tx } from "./client.ts";

/** What an operation needs of Deps to reach the database. */
export interface DatabaseDeps {
  database: Pick<Database, "db">;
}

/**
 * Runs `work` in a transaction: the ctx's own when it carries one, else a new one committed when
 * `work` resolves (rolled back when it throws). `work` gets the transaction and a ctx that carries
 * it, to hand to the operations it calls.
 */
export async function withTransaction<T, C extends Ctx>(
  deps: DatabaseDeps,
  ctx: C,
  work: (tx: Tx, ctx: C & { tx: Tx }) => Promise<T>,
): Promise<T> {
  if (ctx.tx) return work(ctx.tx, ctx as C & { tx: Tx });
  return deps.database.db.transaction((tx) => work(tx, { ...ctx, tx }));
}

/**
 * Runs `work` on the ctx's transaction when it carries one, else on the pool: for reads and single
 * statements that need no transaction of their own.
 */
export async function withDatabase<T>(
  deps: DatabaseDeps,
  ctx: Ctx,
  work: (db: Executor) => Promise<T>,
): Promise<T> {
  return work(ctx.tx ?? deps.database.db);
}
