import { and, eq, lte, ne } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx, TenantCtx } from "../context.ts";
import { withPlatformDatabase, withTransaction } from "../db/operation.ts";
import { tenantDomains } from "../db/schema/index.ts";
import { countResource } from "../usage/record-usage.ts";
import type { DomainDeps } from "./domain-rows.ts";

type ExpiryDeps = Pick<DomainDeps, "database" | "cache" | "clock" | "logger">;

/** Deletes one expired claim with its −1 of usage and its audit entry; false when it is gone or Active now. */
async function expireClaim(
  deps: ExpiryDeps,
  ctx: Ctx,
  claim: { id: string; tenantId: string; hostname: string },
  now: Date,
): Promise<boolean> {
  // the claim's tenant's chain records the removal, by whoever runs the expiry (the loop)
  const claimCtx: TenantCtx = { ...ctx, tenantId: claim.tenantId };
  return withTransaction(deps, claimCtx, async (tx, txCtx) => {
    const rows = await tx
      .delete(tenantDomains)
      .where(
        and(
          eq(tenantDomains.id, claim.id),
          ne(tenantDomains.status, "Active"),
          lte(tenantDomains.expiresAt, now),
        ),
      )
      .returning({ id: tenantDomains.id });
    if (rows.length === 0) return false;
    await countResource(deps, txCtx, { feature: "custom_domains", id: claim.id, quantity: -1 });
    await recordAudit(tx, txCtx, {
      action: "domain.removed",
      target: { type: "domain", id: claim.id },
      details: { hostname: claim.hostname, reason: "claim expired" },
    });
    return true;
  });
}

/**
 * Removes Pending and Failed claims whose time is up (`expires_at`), at most `limit`, each with
 * its −1 of `custom_domains` usage in the transaction that deletes it; resolves how many went. Run
 * by the tenant-domain loop each tick. A claim never reaches the gateway before it is Active, and
 * a domain that lost its name has its gateway id cleared, so nothing is removed there.
 */
export async function expireCustomDomainClaims(
  deps: ExpiryDeps,
  ctx: Ctx,
  input: { limit: number },
): Promise<number> {
  const now = deps.clock.now();
  // across tenants on the named platform path; each removal in its claim's tenant's context
  const due = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({ id: tenantDomains.id, tenantId: tenantDomains.tenantId, hostname: tenantDomains.hostname })
      .from(tenantDomains)
      .where(and(ne(tenantDomains.status, "Active"), lte(tenantDomains.expiresAt, now)))
      .limit(input.limit),
  );
  let removed = 0;
  for (const claim of due) {
    if (!(await expireClaim(deps, ctx, claim, now))) continue;
    removed++;
    deps.logger.info("tenant domain claim expired", {
      tenantId: claim.tenantId,
      domainId: claim.id,
      hostname: claim.hostname,
    });
  }
  return removed;
}
