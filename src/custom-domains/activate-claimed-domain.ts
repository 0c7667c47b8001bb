import { and, eq, ne } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Tx } from "../db/client.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import { tenantDomains } from "../db/schema/index.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import type { ClaimedDomain } from "./claim-due-domains.ts";
import { type DomainCheck, domainCtx, finishCheck } from "./domain-check.ts";
import { claimExpiry } from "./domain-rows.ts";
import { retryDelayMs } from "./settings.ts";
import type { CheckOutcome } from "./verify-records.ts";

const MOVED_REASON =
  "Another tenant proved ownership of this name through its own TXT record; the name now serves that tenant.";

/** "abandoned": the lease or the row is gone; "taken": another claim became Active concurrently. */
export type Activation = "active" | "moved" | "abandoned" | "taken";

/** Turns every other tenant's Active claim on the name Failed (`ownership_moved`); resolves them. */
async function moveNameAway(check: DomainCheck, tx: Tx, domain: ClaimedDomain, now: Date) {
  return tx
    .update(tenantDomains)
    .set({
      status: "Failed",
      lastFailureCode: "ownership_moved",
      lastFailureReason: MOVED_REASON,
      deactivatedAt: now,
      gatewayHostnameId: null,
      gatewayStatus: null,
      tlsStatus: null,
      checkAttempts: 0,
      lastCheckedAt: now,
      // not re-checked on its own (two published values would move the name back and forth):
      // the tenant asks with POST …/check, or the claim expires
      expiresAt: claimExpiry(check.deps, now),
      nextCheckAt: claimExpiry(check.deps, now),
      updatedAt: now,
    })
    .where(
      and(
        eq(tenantDomains.hostname, domain.hostname),
        eq(tenantDomains.status, "Active"),
        ne(tenantDomains.id, domain.id),
      ),
    )
    .returning({ id: tenantDomains.id, tenantId: tenantDomains.tenantId });
}

/** The audit entry and webhook events of an activation, and the log line of each move. */
async function announceActivation(
  check: DomainCheck,
  tx: Tx,
  domain: ClaimedDomain,
  previous: { id: string; tenantId: string }[],
  gatewayId: string,
): Promise<void> {
  const events = enqueueContext(check.deps);
  await recordAudit(tx, domainCtx(check, domain), {
    action: "domain.activated",
    target: { type: "domain", id: domain.id },
    details: { hostname: domain.hostname },
  });
  await emitEvent(tx, events, {
    tenantId: domain.tenantId,
    type: "domain.activated",
    data: { domainId: domain.id, hostname: domain.hostname },
  });
  for (const from of previous)
    await emitEvent(tx, events, {
      tenantId: from.tenantId,
      type: "domain.failed",
      data: { domainId: from.id, hostname: domain.hostname, code: "ownership_moved", reason: MOVED_REASON },
    });
  // the gateway entry is the name's: it now serves the new owner (its id moved to this row)
  for (const from of previous)
    check.deps.logger.info("tenant domain moved", {
      hostname: domain.hostname,
      fromTenantId: from.tenantId,
      fromDomainId: from.id,
      toTenantId: domain.tenantId,
      toDomainId: domain.id,
      gatewayHostnameId: gatewayId,
    });
}

const isUniqueViolation = (error: unknown) =>
  (error as { code?: string })?.code === "23505" ||
  (error as { cause?: { code?: string } })?.cause?.code === "23505";

/**
 * Makes the claim Active, in one transaction with deactivating any other tenant's Active claim
 * on the name (it proved nothing this one did not: this tenant's own TXT value is published now).
 */
export async function activateClaimedDomain(
  check: DomainCheck,
  domain: ClaimedDomain,
  outcome: Extract<CheckOutcome, { ok: true }>,
  now: Date,
): Promise<Activation> {
  const lost = new Error("lease lost");
  try {
    // on the named platform path: it takes the name from other tenants' claims in the same transaction
    return await withPlatformTransaction(check.deps, check.ctx, async (tx) => {
      const previous = await moveNameAway(check, tx, domain, now);
      const stored = await finishCheck(check, tx, domain, {
        status: "Active",
        cnameTarget: outcome.cnameTarget,
        gatewayHostnameId: outcome.gateway.id,
        gatewayStatus: outcome.gateway.status,
        tlsStatus: outcome.gateway.sslStatus,
        lastCheckedAt: now,
        lastFailureCode: null,
        lastFailureReason: null,
        checkAttempts: 0,
        activatedAt: now,
        expiresAt: null,
        deactivatedAt: null,
        // the certificate is usually still pending: refresh its status soon
        nextCheckAt: new Date(now.getTime() + retryDelayMs(check.settings, 1)),
      });
      if (!stored) throw lost;
      await announceActivation(check, tx, domain, previous, outcome.gateway.id);
      return previous.length > 0 ? "moved" : "active";
    });
  } catch (error) {
    if (error === lost) return "abandoned";
    if (isUniqueViolation(error)) return "taken";
    throw error;
  }
}
