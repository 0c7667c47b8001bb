import { and, asc, eq, inArray, isNull, lte, or } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { DnsResolver } from "../custom-domains/dns.ts";
import { withPlatformTransaction, withTransaction } from "../db/operation.ts";
import { tenantEmailDomains } from "../db/schema/sso.ts";
import { emailDomainVerdict } from "./email-domain-dns.ts";
import { applyVerifiedVerdict, type EmailDomainUpkeepDeps } from "./email-domain-recheck.ts";

/**
 * Re-checks the TXT record of verified e-mail domains last checked `Sso:EmailDomainRecheckHours` ago
 * or more, at most `limit`, oldest first (`applyVerifiedVerdict` says what follows). Run by the
 * tenant-domain loop each tick on every API process: a batch is claimed by stamping its
 * `last_checked_at` under `FOR UPDATE SKIP LOCKED`, so no two processes check one domain in a round.
 * Resolves how many it checked.
 */
export async function recheckEmailDomains(
  deps: EmailDomainUpkeepDeps,
  ctx: Ctx,
  input: { limit: number; resolver: DnsResolver },
): Promise<number> {
  const now = deps.clock.now();
  const dueBefore = new Date(now.getTime() - deps.config.settings.Sso.EmailDomainRecheckHours * 3_600_000);
  const claimed = await withPlatformTransaction(deps, ctx, (tx) =>
    tx
      .update(tenantEmailDomains)
      .set({ lastCheckedAt: now })
      .where(
        inArray(
          tenantEmailDomains.id,
          tx
            .select({ id: tenantEmailDomains.id })
            .from(tenantEmailDomains)
            .where(
              and(
                eq(tenantEmailDomains.status, "verified"),
                or(
                  isNull(tenantEmailDomains.lastCheckedAt),
                  lte(tenantEmailDomains.lastCheckedAt, dueBefore),
                ),
              ),
            )
            .orderBy(asc(tenantEmailDomains.lastCheckedAt))
            .limit(input.limit)
            .for("update", { skipLocked: true }),
        ),
      )
      .returning(),
  );
  const settings = deps.config.settings.TenantDomains;
  for (const claim of claimed) {
    try {
      const verdict = await emailDomainVerdict(settings, input.resolver, claim);
      await withTransaction(deps, { ...ctx, tenantId: claim.tenantId }, async (tx, txCtx) => {
        const [row] = await tx
          .select()
          .from(tenantEmailDomains)
          .where(and(eq(tenantEmailDomains.id, claim.id), eq(tenantEmailDomains.tenantId, claim.tenantId)))
          .for("update");
        if (row?.status === "verified") await applyVerifiedVerdict(deps, txCtx, row, verdict);
      });
    } catch (error) {
      // checked again after the re-check interval; the others of the batch go on
      deps.logger.error("e-mail domain re-check crashed", {
        emailDomainId: claim.id,
        error: (error as Error).message,
      });
    }
  }
  return claimed.length;
}
