import { and, eq, ne, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { opaqueToken } from "../auth/opaque-tokens.ts";
import { requireRecentSecondFactor } from "../auth/step-up.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import { claimExpiry } from "../custom-domains/domain-rows.ts";
import { verificationRecordName } from "../custom-domains/hostname-policy.ts";
import { dnsResolver } from "../custom-domains/settings.ts";
import { creationOrder } from "../db/keyset.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { tenantEmailDomains } from "../db/schema/sso.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { createdAtPosition, cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import { parseHostname } from "../tenancy/hostnames.ts";
import { isUuid } from "../tenancy/tenants.ts";
import { emailDomainVerdict } from "./email-domain-dns.ts";
import type { EmailDomainRow } from "./email-domain-recheck.ts";
import { applyVerifiedVerdict } from "./email-domain-recheck.ts";
import type { SsoDeps } from "./sso-deps.ts";

/** An e-mail domain as the API shows it: the TXT record to publish, and where verification stands. */
export interface EmailDomainView {
  id: string;
  domain: string;
  status: EmailDomainRow["status"];
  verification: { type: "TXT"; name: string; value: string };
  lastFailure: { code: string; reason: string } | null;
  lastCheckedAt: string | null;
  verifiedAt: string | null;
  recordMissingSince: string | null;
  expiresAt: string | null;
  createdAt: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function viewOf(deps: SsoDeps, row: EmailDomainRow): EmailDomainView {
  return {
    id: row.id,
    domain: row.domain,
    status: row.status,
    verification: {
      type: "TXT",
      name: verificationRecordName(deps.config.settings.TenantDomains.VerificationRecordPrefix, row.domain),
      value: row.verificationToken,
    },
    lastFailure:
      row.lastFailureCode && row.lastFailureReason
        ? { code: row.lastFailureCode, reason: row.lastFailureReason }
        : null,
    lastCheckedAt: iso(row.lastCheckedAt),
    verifiedAt: iso(row.verifiedAt),
    recordMissingSince: iso(row.recordMissingSince),
    expiresAt: iso(row.expiresAt),
    createdAt: row.createdAt.toISOString(),
  };
}

const notFound = () => new AppError("not_found", "No such e-mail domain.");

async function findRow(deps: SsoDeps, ctx: TenantCtx, id: string): Promise<EmailDomainRow> {
  if (!isUuid(id)) throw notFound();
  const [row] = await withDatabase(deps, ctx, (db) =>
    db
      .select()
      .from(tenantEmailDomains)
      .where(and(eq(tenantEmailDomains.id, id), eq(tenantEmailDomains.tenantId, ctx.tenantId))),
  );
  if (!row) throw notFound();
  return row;
}

/**
 * Claims an e-mail domain for the ctx tenant (`POST /api/tenant/email-domains`): pending, with a
 * verification value of its own to publish as a TXT record at `<VerificationRecordPrefix>.<domain>`,
 * removed after `TenantDomains:ClaimExpiryDays` unless verified. 402 without the `sso` feature; 409
 * when the tenant has the domain already. Other tenants' claims are neither refused nor revealed:
 * the first to prove ownership holds it (`checkEmailDomain`).
 */
export async function addEmailDomain(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { domain: string },
): Promise<EmailDomainView> {
  await requireRecentSecondFactor(deps, ctx);
  await assertFeature(deps, ctx, { feature: "sso" });
  const folded = input.domain.replace(/[A-Z]/g, (ch) => ch.toLowerCase()).replace(/\.$/, "");
  const parsed = parseHostname(folded, { deniedSuffixes: deps.config.settings.TenantDomains.DeniedSuffixes });
  if (!parsed.ok)
    throw new AppError("validation_failed", "The domain is not valid.", {
      fields: [{ path: "domain", message: parsed.reason }],
    });
  const now = deps.clock.now();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const [inserted] = await tx
      .insert(tenantEmailDomains)
      .values({
        tenantId: ctx.tenantId,
        domain: parsed.hostname,
        verificationToken: `plinth-sso-${opaqueToken(24)}`,
        expiresAt: claimExpiry(deps, now),
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing({ target: [tenantEmailDomains.tenantId, tenantEmailDomains.domain] })
      .returning();
    if (!inserted) throw new AppError("conflict", "This tenant has already added this domain.");
    await recordAudit(tx, txCtx, {
      action: "email_domain.added",
      target: { type: "email_domain", id: inserted.id },
      details: { domain: inserted.domain },
    });
    return inserted;
  });
  return viewOf(deps, row);
}

/** The tenant's e-mail domains, newest first (a tenant holds a handful: no paging beyond 200). */
export async function listEmailDomains(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<EmailDomainView>> {
  const after = domainCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(tenantEmailDomains, "desc", after);
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select({ row: tenantEmailDomains, position: keyset.position })
      .from(tenantEmailDomains)
      .where(and(eq(tenantEmailDomains.tenantId, ctx.tenantId), keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    ({ row }) => viewOf(deps, row),
    ({ row, position }) => ({ createdAt: position, id: row.id }),
    domainCursor,
  );
}

/** Where a page of e-mail domains ends: the last one's creation time (PostgreSQL's exact text) and id. */
const domainCursor = cursorCodec(createdAtPosition);

/** Removes one of the tenant's e-mail domains (its addresses stop being routed at once). */
export async function removeEmailDomain(deps: SsoDeps, ctx: TenantCtx, input: { id: string }): Promise<void> {
  await requireRecentSecondFactor(deps, ctx);
  await findRow(deps, ctx, input.id);
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    const [gone] = await tx
      .delete(tenantEmailDomains)
      .where(and(eq(tenantEmailDomains.id, input.id), eq(tenantEmailDomains.tenantId, ctx.tenantId)))
      .returning();
    if (!gone) throw notFound();
    await recordAudit(tx, txCtx, {
      action: "email_domain.removed",
      target: { type: "email_domain", id: gone.id },
      details: { domain: gone.domain },
    });
  });
}

/**
 * Checks a claim's TXT record now, through the DoH resolver custom domains use
 * (`TenantDomains:DnsJsonEndpoint`; 503 when it is not set). The record holding this claim's value
 * verifies it: one verified owner per domain across the platform, so another tenant's verified
 * claim on the domain loses it (`failed`, `ownership_moved`) in the same transaction. Otherwise the
 * claim is `failed` with the reason; a verified claim whose record is gone is judged as the loop's
 * re-check judges it (`applyVerifiedVerdict`: verified through a grace, then `failed`).
 */
export async function checkEmailDomain(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<EmailDomainView> {
  await requireRecentSecondFactor(deps, ctx);
  const row = await findRow(deps, ctx, input.id);
  const settings = deps.config.settings.TenantDomains;
  if (!settings.DnsJsonEndpoint)
    throw new AppError(
      "unavailable",
      "Domain verification is not configured (TenantDomains:DnsJsonEndpoint).",
    );
  const verdict = await emailDomainVerdict(settings, dnsResolver(settings, deps.fetch), row);
  const now = deps.clock.now();
  const updated = await withTransaction(deps, ctx, async (tx, txCtx) => {
    if (row.status === "verified" && !verdict.holds) return applyVerifiedVerdict(deps, txCtx, row, verdict);
    if (!verdict.holds) {
      const [failed] = await tx
        .update(tenantEmailDomains)
        .set({
          status: "failed",
          lastCheckedAt: now,
          lastFailureCode: verdict.code,
          lastFailureReason: verdict.reason,
          updatedAt: now,
        })
        .where(eq(tenantEmailDomains.id, row.id))
        .returning();
      return failed ?? row;
    }
    // the platform path: the claim that loses the domain is another tenant's
    const moved = await tx.execute(sql`select set_config('plinth.platform', 'on', true)`).then(() =>
      tx
        .update(tenantEmailDomains)
        .set({
          status: "failed",
          verifiedAt: null,
          lastFailureCode: "ownership_moved",
          lastFailureReason: "Another tenant proved ownership of this domain with its own TXT record.",
          recordMissingSince: null,
          expiresAt: claimExpiry(deps, now),
          updatedAt: now,
        })
        .where(
          and(
            eq(tenantEmailDomains.domain, row.domain),
            eq(tenantEmailDomains.status, "verified"),
            ne(tenantEmailDomains.id, row.id),
          ),
        )
        .returning({ tenantId: tenantEmailDomains.tenantId }),
    );
    await tx.execute(sql`select set_config('plinth.platform', '', true)`);
    const [verified] = await tx
      .update(tenantEmailDomains)
      .set({
        status: "verified",
        lastCheckedAt: now,
        lastFailureCode: null,
        lastFailureReason: null,
        recordMissingSince: null,
        verifiedAt: row.verifiedAt ?? now,
        expiresAt: null,
        updatedAt: now,
      })
      .where(eq(tenantEmailDomains.id, row.id))
      .returning();
    if (row.status !== "verified") {
      await emitEvent(tx, deps, {
        tenantId: ctx.tenantId,
        type: "email_domain.verified",
        data: { emailDomainId: row.id, domain: row.domain },
      });
      await recordAudit(tx, txCtx, {
        action: "email_domain.verified",
        target: { type: "email_domain", id: row.id },
        details: { domain: row.domain, movedFrom: moved[0]?.tenantId ?? null },
      });
    }
    return verified ?? row;
  });
  return viewOf(deps, updated);
}
