import { withPlatformDatabase, withTransaction } from "../db/operation.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import { activateClaimedDomain } from "./activate-claimed-domain.ts";
import type { ClaimedDomain } from "./claim-due-domains.ts";
import { type CheckResult, type DomainCheck, domainCtx, finishCheck } from "./domain-check.ts";
import { activeElsewhere } from "./domain-rows.ts";
import { verificationRecordName } from "./hostname-policy.ts";
import { releaseAbandonedDomain } from "./release-abandoned-domain.ts";
import { retryDelayMs } from "./settings.ts";
import { type CheckOutcome, verifyDomainRecords } from "./verify-records.ts";

type Failure = Extract<CheckOutcome, { ok: false }>;

/** Stores a failed check (Failed, backing off) and tells the tenant once, as the claim turns Failed. */
async function recordCheckFailure(
  check: DomainCheck,
  domain: ClaimedDomain,
  outcome: Failure,
  now: Date,
): Promise<CheckResult> {
  const { deps, settings } = check;
  const attempts = domain.checkAttempts + 1;
  const failure = { code: outcome.code, reason: outcome.reason };
  const stored = await withTransaction(deps, domainCtx(check, domain), async (tx) => {
    const written = await finishCheck(check, tx, domain, {
      status: "Failed",
      cnameTarget: outcome.cnameTarget,
      lastCheckedAt: now,
      lastFailureCode: failure.code,
      lastFailureReason: failure.reason,
      checkAttempts: attempts,
      nextCheckAt: new Date(now.getTime() + retryDelayMs(settings, attempts)),
    });
    // told once, as the claim turns Failed (not at every re-check of a Failed one)
    if (written && domain.status !== "Failed")
      await emitEvent(tx, enqueueContext(deps), {
        tenantId: domain.tenantId,
        type: "domain.failed",
        data: { domainId: domain.id, hostname: domain.hostname, ...failure },
      });
    return written;
  });
  if (stored) {
    if (domain.status !== "Failed") deps.tenants.clear();
    deps.logger.info("tenant domain check failed", {
      domainId: domain.id,
      hostname: domain.hostname,
      code: outcome.code,
      attempts,
    });
  }
  return { status: "Failed", code: outcome.code };
}

/**
 * Verifies a Pending or Failed claim (TXT, CNAME, gateway) and makes it Active when all hold;
 * otherwise records why. A claim whose TXT record does not hold its value while another tenant has
 * the name Active is told so (`in_use_elsewhere`), and how to take the name over.
 */
export async function verifyClaimedDomain(check: DomainCheck, domain: ClaimedDomain): Promise<CheckResult> {
  const { deps, settings } = check;
  const recordName = verificationRecordName(settings.VerificationRecordPrefix, domain.hostname);
  const outcome = await verifyDomainRecords(check.services, {
    hostname: domain.hostname,
    token: domain.verificationToken,
    recordName,
    targets: check.targets,
  });
  const now = deps.clock.now();
  if (outcome.ok) {
    const activation = await activateClaimedDomain(check, domain, outcome, now);
    if (activation === "abandoned") await releaseAbandonedDomain(check, domain, outcome.gateway.id);
    if (activation === "active" || activation === "moved") {
      deps.tenants.clear();
      deps.logger.info("tenant domain active", {
        domainId: domain.id,
        tenantId: domain.tenantId,
        hostname: domain.hostname,
        tlsStatus: outcome.gateway.sslStatus,
      });
    }
    if (activation !== "taken") return { status: "Active", code: null };
    // another claim on the name was activated at this very moment: check again soon
    return recordCheckFailure(
      check,
      domain,
      {
        ok: false,
        code: "in_use_elsewhere",
        reason: "This name is in use elsewhere; it was verified by another claim at the same moment.",
        cnameTarget: outcome.cnameTarget,
      },
      now,
    );
  }
  const unproven = outcome.code === "txt_missing" || outcome.code === "txt_mismatch";
  // another tenant's claim: a platform lookup
  if (unproven && (await withPlatformDatabase(deps, check.ctx, (db) => activeElsewhere(db, domain))))
    // told only now, when the claim is checked: publish this claim's own value to take the name over
    return recordCheckFailure(
      check,
      domain,
      {
        ok: false,
        code: "in_use_elsewhere",
        reason: `This name is in use elsewhere. To move it here, publish this domain's own verification value at ${recordName}.`,
        cnameTarget: outcome.cnameTarget,
      },
      now,
    );
  return recordCheckFailure(check, domain, outcome, now);
}
