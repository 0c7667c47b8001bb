/**
 * How a domain operation reaches the database: through the ctx it was given, never through
 * `deps.database` directly. One place decides what a unit of work is, so a caller's transaction is
 * joined (an operation called inside another's) and per-transaction settings have one home: the
 * tenant a transaction acts in (`plinth.tenant_id`, which the row-level security of every tenant
 * table reads, docs/tenant-isolation.md) and the explicit platform path (`plinth.platform`).
 */
import { sql } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Database, Executor, Tx } from "./client.ts";

/** What an operation needs of Deps to reach the database. */
export interface DatabaseDeps {
  database: Pick<Database, "db" | "tenantContext">;
}

/**
 * Opens a transaction with its settings. `set_config(..., true)` lasts until the transaction ends,
 * so a pooled connection (PgBouncer in transaction mode included) never hands it to its next
 * user. The setting is sent without waiting for its answer: the first statement of `work` follows
 * it on the same connection (one round trip, not two), and an error of either fails the whole.
 */
function transactionWith<T>(
  deps: DatabaseDeps,
  settings: { tenantId: string | null; platform: boolean; snapshot?: boolean },
  work: (tx: Tx) => Promise<T>,
): Promise<T> {
  // `set transaction` must come first: drizzle sends it before `work`'s statements and the setting
  const config = settings.snapshot
    ? ({ isolationLevel: "repeatable read", accessMode: "read only" } as const)
    : undefined;
  return deps.database.db.transaction(async (tx) => {
    if ((!settings.tenantId && !settings.platform) || deps.database.tenantContext === false) return work(tx);
    const setting = settings.platform
      ? tx.execute(sql`select set_config('plinth.platform', 'on', true)`)
      : tx.execute(sql`select set_config('plinth.tenant_id', ${settings.tenantId}, true)`);
    const [, result] = await Promise.all([Promise.resolve(setting), work(tx)]);
    return result;
  }, config);
}

/**
 * Runs `work` in a transaction: the ctx's own when it carries one, else a new one in the ctx's
 * tenant (`plinth.tenant_id`; none for a ctx without one, which sees no tenant's rows), committed
 * when `work` resolves (rolled back when it throws). `work` gets the transaction and a ctx that
 * carries it, to hand to the operations it calls.
 */
export async function withTransaction<T, C extends Ctx>(
  deps: DatabaseDeps,
  ctx: C,
  work: (tx: Tx, ctx: C & { tx: Tx }) => Promise<T>,
): Promise<T> {
  if (ctx.tx) return work(ctx.tx, ctx as C & { tx: Tx });
  return transactionWith(deps, { tenantId: ctx.tenantId, platform: false }, (tx) => work(tx, { ...ctx, tx }));
}

/**
 * Runs `work` on the ctx's transaction when it carries one; else, for a ctx in a tenant, in a
 * transaction of its own in that tenant (the tenant setting needs one), and on the pool for a ctx
 * without a tenant (which sees only the tables that have no tenant).
 */
export async function withDatabase<T>(
  deps: DatabaseDeps,
  ctx: Ctx,
  work: (db: Executor) => Promise<T>,
): Promise<T> {
  if (ctx.tx) return work(ctx.tx);
  if (ctx.tenantId && deps.database.tenantContext !== false)
    return transactionWith(deps, { tenantId: ctx.tenantId, platform: false }, work);
  return work(deps.database.db);
}

/**
 * The one explicit path across tenants: a transaction with `plinth.platform` on, which the
 * `platform_access` policy of every tenant table lets through (loops over every tenant, job
 * handlers that find their tenant in the row, admin lists, platform staff and their sessions, the
 * migrator, audit verification). Joins the ctx's transaction only when that one is on the platform
 * path too: a tenant's transaction never widens into it. `snapshot`: repeatable read, read only.
 */
export async function withPlatformTransaction<T, C extends Ctx>(
  deps: DatabaseDeps,
  ctx: C,
  work: (tx: Tx, ctx: C & { tx: Tx; platform: true }) => Promise<T>,
  options: { snapshot?: boolean } = {},
): Promise<T> {
  if (ctx.tx) {
    if (!ctx.platform) throw new Error("the platform path cannot join a transaction that is not on it");
    return work(ctx.tx, ctx as C & { tx: Tx; platform: true });
  }
  return transactionWith(deps, { tenantId: null, platform: true, snapshot: options.snapshot }, (tx) =>
    work(tx, { ...ctx, tx, platform: true }),
  );
}

/**
 * For the rows of a tenant's users or of platform staff (`tenant_id` null: sign-in, sessions,
 * platform users): in the ctx's tenant when it has one (or its transaction), else on the platform
 * path. Every query inside still names its tenant (`sameTenant`, src/auth/user-identity.ts); the
 * platform path is what lets a staff row (no tenant) be read at all.
 */
export async function withTenantOrPlatform<T, C extends Ctx>(
  deps: DatabaseDeps,
  ctx: C,
  work: (tx: Tx, ctx: C & { tx: Tx }) => Promise<T>,
): Promise<T> {
  if (ctx.tx || ctx.tenantId) return withTransaction(deps, ctx, work);
  return withPlatformTransaction(deps, ctx, work);
}
