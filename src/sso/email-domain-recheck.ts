import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { claimExpiry } from "../custom-domains/domain-rows.ts";
import type { Tx } from "../db/client.ts";
import { tenantEmailDomains } from "../db/schema/sso.ts";
import type { Deps } from "../deps.ts";
import { emitEvent } from "../events/outbox.ts";
import type { EmailDomainVerdict } from "./email-domain-dns.ts";

export type EmailDomainRow = typeof tenantEmailDomains.$inferSelect;

/** What the upkeep of e-mail domains needs: the database, the clock, the settings, the log. */
export type EmailDomainUpkeepDeps = Pick<Deps, "database" | "clock" | "config" | "logger">;

const DAY_MS = 86_400_000;

/**
 * A verified domain's re-check (docs/sso.md, "Verified e-mail domains"), in its tenant's transaction:
 * the record holding clears any earlier failure; a failed lookup (`dns_error`) is noted and proves
 * nothing; DNS answering that the record is gone (NXDOMAIN, no TXT, another value) starts the grace
 * (`recordMissingSince`, audited `email_domain.record_missing`) and, once it has lasted
 * `Sso:EmailDomainGraceDays`, turns the domain `failed` (audited and announced
 * `email_domain.unverified`): its addresses are no longer routed, accepted or held to SSO, and the
 * claim expires as any unverified one unless its record comes back and is checked.
 */
export async function applyVerifiedVerdict(
  deps: EmailDomainUpkeepDeps,
  ctx: TenantCtx & { tx: Tx },
  row: EmailDomainRow,
  verdict: EmailDomainVerdict,
): Promise<EmailDomainRow> {
  const now = deps.clock.now();
  const { tx } = ctx;
  const write = async (set: Partial<typeof tenantEmailDomains.$inferInsert>) => {
    const [updated] = await tx
      .update(tenantEmailDomains)
      .set({ lastCheckedAt: now, updatedAt: now, ...set })
      .where(
        and(
          eq(tenantEmailDomains.id, row.id),
          eq(tenantEmailDomains.tenantId, ctx.tenantId),
          eq(tenantEmailDomains.status, "verified"),
        ),
      )
      .returning();
    return updated ?? row;
  };
  if (verdict.holds)
    return write({ lastFailureCode: null, lastFailureReason: null, recordMissingSince: null });
  if (verdict.code === "dns_error")
    return write({ lastFailureCode: verdict.code, lastFailureReason: verdict.reason });
  const since = row.recordMissingSince ?? now;
  const graceDays = deps.config.settings.Sso.EmailDomainGraceDays;
  const unverifiesAt = new Date(since.getTime() + graceDays * DAY_MS);
  if (now < unverifiesAt) {
    const updated = await write({
      lastFailureCode: verdict.code,
      lastFailureReason: `${verdict.reason} The domain stays verified until ${unverifiesAt.toISOString()} unless the record is restored.`,
      recordMissingSince: since,
    });
    if (!row.recordMissingSince)
      await recordAudit(tx, ctx, {
        action: "email_domain.record_missing",
        target: { type: "email_domain", id: row.id },
        details: { domain: row.domain, code: verdict.code, unverifiesAt: unverifiesAt.toISOString() },
      });
    return updated;
  }
  const reason = `${verdict.reason} The record has been gone since ${since.toISOString()}: the domain is no longer verified.`;
  const updated = await write({
    status: "failed",
    verifiedAt: null,
    recordMissingSince: null,
    lastFailureCode: verdict.code,
    lastFailureReason: reason,
    expiresAt: claimExpiry(deps, now),
  });
  if (updated.status !== "failed") return updated;
  await recordAudit(tx, ctx, {
    action: "email_domain.unverified",
    target: { type: "email_domain", id: row.id },
    details: { domain: row.domain, code: verdict.code, missingSince: since.toISOString() },
  });
  await emitEvent(tx, deps, {
    tenantId: ctx.tenantId,
    type: "email_domain.unverified",
    data: { emailDomainId: row.id, domain: row.domain, code: verdict.code, reason },
  });
  deps.logger.info("e-mail domain unverified: its TXT record is gone", {
    tenantId: ctx.tenantId,
    emailDomainId: row.id,
    domain: row.domain,
  });
  return updated;
}
