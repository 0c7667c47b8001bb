import type { Ctx } from "../context.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import { type ClaimedDomain, claimDueDomains } from "./claim-due-domains.ts";
import type { CheckResult, DomainCheck, DomainCheckDeps, DomainCheckServices } from "./domain-check.ts";
import { refreshDomainTls } from "./refresh-domain-tls.ts";
import { cnameTargets } from "./settings.ts";
import { verifyClaimedDomain } from "./verify-claimed-domain.ts";

/** Checks run at once per tick within one process (each is a few DNS and gateway requests). */
const PARALLEL_CHECKS = 8;

export interface CheckDueDomainsInput {
  /** Lease owner id. */
  owner: string;
  services: DomainCheckServices;
  /** Called after each domain handled (tests observe progress without sleeping). */
  onChecked?: (domain: ClaimedDomain, result: CheckResult) => void;
}

/**
 * Claims a batch of due domains with a lease (`TenantDomains:BatchSize`, `LeaseSeconds`) and checks
 * each: Pending and Failed ones are verified, Active ones without an issued certificate have their
 * TLS status refreshed. A check that crashes leaves its lease to run out (it is checked again); the
 * others of the batch go on. Resolves how many domains it claimed.
 */
export async function checkDueCustomDomains(
  deps: DomainCheckDeps,
  ctx: Ctx,
  input: CheckDueDomainsInput,
): Promise<number> {
  const settings = deps.config.settings.TenantDomains;
  // across tenants: the named platform path claims; each check then works in its domain's tenant's context
  const claimed = await withPlatformDatabase(deps, ctx, (db) =>
    claimDueDomains(db, {
      owner: input.owner,
      now: deps.clock.now(),
      leaseMs: settings.LeaseSeconds * 1000,
      limit: settings.BatchSize,
    }),
  );
  const check: DomainCheck = {
    deps,
    ctx,
    owner: input.owner,
    settings,
    targets: cnameTargets(settings),
    services: input.services,
  };
  const queue = [...claimed];
  const worker = async () => {
    for (let domain = queue.shift(); domain; domain = queue.shift()) {
      try {
        const result =
          domain.status === "Active"
            ? await refreshDomainTls(check, domain)
            : await verifyClaimedDomain(check, domain);
        input.onChecked?.(domain, result);
      } catch (error) {
        // the lease runs out and the domain is checked again; the others of the batch go on
        deps.logger.error("tenant domain check crashed", {
          domainId: domain.id,
          error: (error as Error).message,
        });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL_CHECKS, claimed.length) }, worker));
  return claimed.length;
}
