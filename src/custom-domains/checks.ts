import { systemCtx } from "../context.ts";
import { workerId } from "../runtime/worker-id.ts";
import { checkDueCustomDomains } from "./check-due-custom-domains.ts";
import type { ClaimedDomain } from "./claim-due-domains.ts";
import type { DnsResolver } from "./dns.ts";
import type { CheckResult, DomainCheckDeps } from "./domain-check.ts";
import { expireCustomDomainClaims } from "./expire-custom-domain-claims.ts";
import type { GatewayClient } from "./gateway.ts";
import { dnsResolver, gatewayClient, missingDomainSettings } from "./settings.ts";

export interface DomainCheckOptions {
  /** Lease owner id; default `workerId()`. */
  owner?: string;
  /** Test seams: services built from configuration otherwise. */
  resolver?: DnsResolver;
  gateway?: GatewayClient;
  /** Called after each domain a tick handled (tests observe progress without sleeping). */
  onChecked?: (domain: ClaimedDomain, result: CheckResult) => void;
}

export interface DomainTicker {
  owner: string;
  /** One round: expires old claims, claims a batch and checks it; resolves how many domains it handled. */
  tick(): Promise<number>;
}

/**
 * The tenant-domain loop's round (src/loops/tenant-domains-loop.ts), bound once to this process's
 * lease owner and services: `expireCustomDomainClaims`, then `checkDueCustomDomains`. With the
 * configuration incomplete it claims nothing and changes nothing, and says so once in the log
 * (configuration is read at start-up, so completing it takes a restart).
 */
export function createDomainTicker(deps: DomainCheckDeps, options: DomainCheckOptions = {}): DomainTicker {
  const settings = deps.config.settings.TenantDomains;
  const owner = options.owner ?? workerId();
  const missing = missingDomainSettings(settings);
  const resolver = options.resolver ?? dnsResolver(settings, deps.fetch);
  const gateway = options.gateway ?? gatewayClient(settings, deps.logger, deps.fetch);
  const ctx = systemCtx("tenant-domains");
  let toldIncomplete = false;
  return {
    owner,
    async tick() {
      await expireCustomDomainClaims(deps, ctx, { limit: settings.BatchSize });
      if (missing.length > 0 || !gateway) {
        if (!toldIncomplete) {
          toldIncomplete = true;
          deps.logger.warn("tenant domains are not verified: configuration incomplete", { missing });
        }
        return 0;
      }
      return checkDueCustomDomains(deps, ctx, {
        owner,
        services: { resolver, gateway },
        onChecked: options.onChecked,
      });
    },
  };
}
