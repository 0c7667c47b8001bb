import { eq, sql } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import { execute } from "../db/client.ts";
import { type DatabaseDeps, withPlatformDatabase, withTenantOrPlatformTransaction } from "../db/operation.ts";
import { auditChains } from "../db/schema/audit.ts";
import type { Deps } from "../deps.ts";
import { PLATFORM_CHAIN } from "./chain.ts";

export type AuditRetentionDeps = DatabaseDeps & Pick<Deps, "clock" | "config" | "logger">;

/** Rows one chain loses per transaction; `pruneAuditEvents` goes on until nothing old is left. */
const PRUNE_BATCH = 10_000;

/**
 * Retention (`Audit:RetentionDays`): in each chain, deletes the prefix up to the newest row older
 * than the cutoff — whole prefixes only, so what is left is still one unbroken chain — and records
 * where the chain now starts (`audit_chains.start_hash`, the hash of the last row removed, and
 * `pruned_through_id`), in one transaction under the chain's lock. `audit:verify` then starts there.
 * Returns the number of rows removed.
 */
export async function pruneAuditEvents(deps: AuditRetentionDeps, ctx: Ctx): Promise<number> {
  const days = deps.config.settings.Audit.RetentionDays;
  const cutoff = new Date(deps.clock.now().getTime() - days * 86_400_000);
  const chains = await withPlatformDatabase(deps, ctx, (db) =>
    db.select({ chain: auditChains.chain }).from(auditChains),
  );
  let total = 0;
  for (const { chain } of chains) {
    for (;;) {
      const removed = await pruneChainBatch(deps, ctx, { chain, cutoff });
      total += removed;
      if (removed < PRUNE_BATCH) break;
    }
  }
  if (total > 0)
    deps.logger.info("audit events pruned", { count: total, cutoff: cutoff.toISOString(), days });
  return total;
}

async function pruneChainBatch(
  deps: AuditRetentionDeps,
  ctx: Ctx,
  input: { chain: string; cutoff: Date },
): Promise<number> {
  const { chain, cutoff } = input;
  const inChain = chain === PLATFORM_CHAIN ? sql`tenant_id is null` : sql`tenant_id = ${chain}::uuid`;
  // in the chain's tenant's context (the platform chain on the named platform path)
  return withTenantOrPlatformTransaction(deps, ctx, chain === PLATFORM_CHAIN ? null : chain, async (tx) => {
    // the chain's writers wait on this row lock, so the head cannot move while its start does
    const [locked] = await tx
      .select({ chain: auditChains.chain })
      .from(auditChains)
      .where(eq(auditChains.chain, chain))
      .for("update");
    if (!locked) return 0;
    const [through] = await execute<{ id: string; hash: string; n: string }>(
      tx,
      sql`with old as (
            select id, hash from audit_events
            where ${inChain}
              and id <= (select max(id) from audit_events where ${inChain} and occurred_at < ${cutoff.toISOString()}::timestamptz)
            order by id limit ${PRUNE_BATCH})
          select old.id::text as id, old.hash, (select count(*) from old)::text as n from old order by old.id desc limit 1`,
    );
    if (!through) return 0;
    await execute(tx, sql`delete from audit_events where ${inChain} and id <= ${through.id}::bigint`);
    await tx
      .update(auditChains)
      .set({
        startHash: through.hash,
        prunedThroughId: Number(through.id),
        prunedAt: deps.clock.now(),
        updatedAt: sql`now()`,
      })
      .where(eq(auditChains.chain, chain));
    return Number(through.n);
  });
}
