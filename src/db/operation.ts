/**
 * How a domain operation reaches the database: through the ctx it was given, never through
 * `deps.database` directly. One place decides what a unit of work is, so a caller's transaction is
 * joined (an operation called inside another's) and per-transaction settings have one home: the
 * row-level-security context (`plinth.tenant_id` from the ctx's tenant, or `plinth.platform` on the
 * named platform path; src/db/tenant-scope.ts, docs/architecture.md "Every tenant table is born with
 * its policy").
 */
import type { Ctx } from "../context.ts";
import type { Database, Executor, Tx } from "./client.ts";
import {
  type DatabaseScope,
  type ScopeMode,
  scopedReaderOf,
  scopedRunnerOf,
  scopeSetting,
} from "./tenant-scope.ts";

/** What an operation needs of Deps to reach the database. */
export interface DatabaseDeps {
  database: Pick<Database, "db">;
}

/** Runs `work` in a new transaction whose context is `scope`, pipelined where the driver allows. */
function inScope<T>(deps: DatabaseDeps, scope: DatabaseScope, work: (tx: Tx) => Promise<T>, mode: ScopeMode) {
  const { db } = deps.database;
  const run = scopedRunnerOf(db);
  if (run) return run(scope, work, mode);
  const snapshot = "platform" in scope && scope.snapshot;
  return db.transaction(
    async (tx) => {
      await tx.execute(scopeSetting(scope));
      return work(tx);
    },
    snapshot ? { isolationLevel: "repeatable read", accessMode: "read only" } : undefined,
  );
}

/**
 * Runs `work` in a transaction: the ctx's own when it carries one, else a new one committed when
 * `work` resolves (rolled back when it throws), in the ctx tenant's row-level-security context.
 * `work` gets the transaction and a ctx that carries it, to hand to the operations it calls.
 */
export async function withTransaction<T, C extends Ctx>(
  deps: DatabaseDeps,
  ctx: C,
  work: (tx: Tx, ctx: C & { tx: Tx }) => Promise<T>,
): Promise<T> {
  if (ctx.tx) return work(ctx.tx, ctx as C & { tx: Tx });
  if (ctx.tenantId === null) return deps.database.db.transaction((tx) => work(tx, { ...ctx, tx }));
  const { tenantId } = ctx;
  return inScope(deps, { tenantId }, (tx) => work(tx, { ...ctx, tx }), "write");
}

/**
 * Runs `work` on the ctx's transaction when it carries one, else on the pool: for reads and single
 * statements that need no transaction of their own. With a tenant's ctx every statement carries the
 * tenant's context in front of it, in its own implicit transaction (src/db/tenant-scope.ts,
 * `scopePrelude`): no BEGIN, COMMIT or reserved connection, so a read costs what it did without one
 * (docs/performance.md, "Tenant context A/B"). A ctx without a tenant reads with no context: under
 * the API's role it sees no tenant row (platform reads go through withPlatformDatabase).
 */
export async function withDatabase<T>(
  deps: DatabaseDeps,
  ctx: Ctx,
  work: (db: Executor) => Promise<T>,
): Promise<T> {
  if (ctx.tx) return work(ctx.tx);
  const { db } = deps.database;
  if (ctx.tenantId === null) return work(db);
  const read = scopedReaderOf(db);
  if (read) return read({ tenantId: ctx.tenantId }, work);
  return work(db);
}

/**
 * The named platform path for reads and single statements (loops, lookups before a tenant is known,
 * platform lists): every statement sees every tenant's rows (`plinth.platform` = `on`, per statement
 * as withDatabase's tenant context). Joins the ctx's transaction only when it is a platform one.
 */
export async function withPlatformDatabase<T>(
  deps: DatabaseDeps,
  ctx: Ctx,
  work: (db: Executor) => Promise<T>,
): Promise<T> {
  if (ctx.tx) {
    if (platformTransactions.has(ctx.tx)) return work(ctx.tx);
    throw new Error("withPlatformDatabase inside a transaction that is not a platform one");
  }
  const { db } = deps.database;
  const read = scopedReaderOf(db);
  if (read) return read({ platform: true }, work);
  // PGlite: one user, a superuser, whom policies never hold
  return work(db);
}

/**
 * The one named path across tenants (loops, platform lists, the migrator's seeders): a transaction
 * on which every tenant table admits every row (`plinth.platform` = `on`). The ctx's own transaction
 * is joined only when it is itself a platform one; a tenant's transaction is never widened.
 */
export async function withPlatformTransaction<T, C extends Ctx>(
  deps: DatabaseDeps,
  ctx: C,
  work: (tx: Tx, ctx: C & { tx: Tx }) => Promise<T>,
): Promise<T> {
  if (ctx.tx) {
    if (platformTransactions.has(ctx.tx)) return work(ctx.tx, ctx as C & { tx: Tx });
    throw new Error("withPlatformTransaction inside a transaction that is not a platform one");
  }
  return inScope(
    deps,
    { platform: true },
    (tx) => {
      platformTransactions.add(tx);
      return work(tx, { ...ctx, tx }).finally(() => platformTransactions.delete(tx));
    },
    "write",
  );
}

/**
 * The named platform path for reads across tenants that must agree with each other (audit
 * verification, checkpoints): a read-only transaction of its own on one snapshot (repeatable read,
 * set as it begins: no statement may come before it, so it never joins the ctx's transaction).
 */
export function withPlatformSnapshot<T>(
  deps: DatabaseDeps,
  ctx: Ctx,
  work: (tx: Tx) => Promise<T>,
): Promise<T> {
  if (ctx.tx) throw new Error("withPlatformSnapshot inside a transaction");
  return inScope(deps, { platform: true, snapshot: true }, work, "read");
}

/**
 * A transaction of its own for rows whose tenant is known from the rows themselves (a session's, an
 * audit chain's): in `tenantId`'s context, or on the named platform path for platform rows (tenant
 * null: platform staff's sessions, the platform audit chain). Never joins the ctx's transaction.
 */
export function withTenantOrPlatformTransaction<T>(
  deps: DatabaseDeps,
  ctx: Ctx,
  tenantId: string | null,
  work: (tx: Tx, ctx: Ctx & { tx: Tx }) => Promise<T>,
): Promise<T> {
  const own = { ...ctx, tx: undefined };
  return tenantId === null
    ? withPlatformTransaction(deps, own, work)
    : withTransaction(deps, { ...own, tenantId }, work);
}

/**
 * withTransaction for work whose ctx is either a tenant's or, without a tenant, platform staff's own
 * (a staff member's sign-in, session or password): the ctx tenant's context, or the named platform
 * path when the ctx has no tenant. Joins the ctx's transaction as those two do.
 */
export function withTransactionOrPlatform<T, C extends Ctx>(
  deps: DatabaseDeps,
  ctx: C,
  work: (tx: Tx, ctx: C & { tx: Tx }) => Promise<T>,
): Promise<T> {
  return ctx.tenantId === null ? withPlatformTransaction(deps, ctx, work) : withTransaction(deps, ctx, work);
}

/**
 * withDatabase's counterpart of withTenantOrPlatformTransaction, for reads whose tenant is known
 * before the ctx's (a sign-in's lookup, a session's identity): in `tenantId`'s context, or on the
 * named platform path for platform rows (tenant null: platform staff). Joins the ctx's transaction
 * only when it is one of that scope.
 */
export function withTenantOrPlatformDatabase<T>(
  deps: DatabaseDeps,
  ctx: Ctx,
  tenantId: string | null,
  work: (db: Executor) => Promise<T>,
): Promise<T> {
  if (tenantId === null) return withPlatformDatabase(deps, ctx, work);
  if (ctx.tx && ctx.tenantId !== tenantId)
    return withDatabase(deps, { ...ctx, tx: undefined, tenantId }, work);
  return withDatabase(deps, { ...ctx, tenantId }, work);
}

/** Transactions opened by withPlatformTransaction, while they run. */
const platformTransactions = new WeakSet<Tx>();
