import { and, eq, lte, ne } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { withPlatformDatabase, withTransaction } from "../db/operation.ts";
import { tenantEmailDomains } from "../db/schema/sso.ts";
import type { EmailDomainUpkeepDeps } from "./email-domain-recheck.ts";

/**
 * Removes pending and failed e-mail-domain claims whose time is up (`expires_at`,
 * `TenantDomains:ClaimExpiryDays` after they were made or lost their verification), at most
 * `limit`, each audited (`email_domain.removed`, `reason: "claim expired"`) in its tenant's chain.
 * Run by the tenant-domain loop each tick; resolves how many went.
 */
export async function expireEmailDomainClaims(
  deps: EmailDomainUpkeepDeps,
  ctx: Ctx,
  input: { limit: number },
): Promise<number> {
  const now = deps.clock.now();
  const expired = and(ne(tenantEmailDomains.status, "verified"), lte(tenantEmailDomains.expiresAt, now));
  const due = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({ id: tenantEmailDomains.id, tenantId: tenantEmailDomains.tenantId })
      .from(tenantEmailDomains)
      .where(expired)
      .limit(input.limit),
  );
  let removed = 0;
  for (const claim of due) {
    const gone = await withTransaction(deps, { ...ctx, tenantId: claim.tenantId }, async (tx, txCtx) => {
      const [row] = await tx
        .delete(tenantEmailDomains)
        .where(
          and(eq(tenantEmailDomains.id, claim.id), eq(tenantEmailDomains.tenantId, claim.tenantId), expired),
        )
        .returning();
      if (!row) return null;
      await recordAudit(tx, txCtx, {
        action: "email_domain.removed",
        target: { type: "email_domain", id: row.id },
        details: { domain: row.domain, reason: "claim expired", status: row.status },
      });
      return row;
    });
    if (!gone) continue;
    removed++;
    deps.logger.info("e-mail domain claim expired", {
      tenantId: claim.tenantId,
      emailDomainId: claim.id,
      domain: gone.domain,
    });
  }
  return removed;
}
