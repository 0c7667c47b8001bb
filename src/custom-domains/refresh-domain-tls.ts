import { withDatabase } from "../db/operation.ts";
import type { ClaimedDomain } from "./claim-due-domains.ts";
import { type CheckResult, type DomainCheck, domainCtx, finishCheck } from "./domain-check.ts";
import { releaseAbandonedDomain } from "./release-abandoned-domain.ts";
import { retryDelayMs } from "./settings.ts";

/** An Active domain whose certificate is not issued yet: refreshes the gateway's statuses. */
export async function refreshDomainTls(check: DomainCheck, domain: ClaimedDomain): Promise<CheckResult> {
  const { deps, settings } = check;
  const gateway = check.services.gateway;
  const now = deps.clock.now();
  const attempts = domain.checkAttempts + 1;
  const nextCheckAt = new Date(now.getTime() + retryDelayMs(settings, attempts));
  try {
    const entry =
      (domain.gatewayHostnameId ? await gateway.get(domain.gatewayHostnameId) : null) ??
      (await gateway.ensure(domain.hostname));
    const stored = await withDatabase(deps, domainCtx(check, domain), (db) =>
      finishCheck(check, db, domain, {
        gatewayHostnameId: entry.id,
        gatewayStatus: entry.status,
        tlsStatus: entry.sslStatus,
        lastCheckedAt: now,
        checkAttempts: attempts,
        nextCheckAt,
      }),
    );
    // deleted meanwhile: its removal may have run before `ensure` registered it again
    if (!stored) await releaseAbandonedDomain(check, domain, entry.id);
    return { status: "Active", code: null };
  } catch (error) {
    deps.logger.warn("tenant domain TLS status not refreshed", {
      domainId: domain.id,
      error: (error as Error).message,
    });
    await withDatabase(deps, domainCtx(check, domain), (db) =>
      finishCheck(check, db, domain, { lastCheckedAt: now, checkAttempts: attempts, nextCheckAt }),
    );
    return { status: "Active", code: "gateway_error" };
  }
}
