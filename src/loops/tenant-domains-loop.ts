import { systemCtx } from "../context.ts";
import { createDomainTicker } from "../custom-domains/checks.ts";
import { dnsResolver } from "../custom-domains/settings.ts";
import { expireEmailDomainClaims } from "../sso/expire-email-domain-claims.ts";
import { recheckEmailDomains } from "../sso/recheck-email-domains.ts";
import type { LoopFactory } from "./background.ts";
import { startIntervalLoop } from "./interval-loop.ts";

/**
 * The tenant-domain loop (`TenantDomains:*`): every `PollSeconds` it claims and checks due custom
 * domains (`createDomainTicker`), and keeps the SSO e-mail domains (docs/sso.md): expired claims
 * removed, verified domains' TXT records re-checked; at once again while batches come back full.
 */
export const tenantDomainsLoop: LoopFactory = (deps) => {
  const ticker = createDomainTicker(deps);
  const settings = deps.config.settings.TenantDomains;
  const resolver = dnsResolver(settings, deps.fetch);
  const ctx = systemCtx("tenant-domains");
  return startIntervalLoop(deps, "tenantDomains", {
    intervalMs: settings.PollSeconds * 1000,
    step: async () => {
      const checked = await ticker.tick();
      await expireEmailDomainClaims(deps, ctx, { limit: settings.BatchSize });
      const rechecked = await recheckEmailDomains(deps, ctx, { limit: settings.BatchSize, resolver });
      return checked >= settings.BatchSize || rechecked >= settings.BatchSize;
    },
  });
};
