import { createDomainTicker } from "../custom-domains/checks.ts";
import type { LoopFactory } from "./background.ts";
import { startIntervalLoop } from "./interval-loop.ts";

/**
 * The tenant-domain loop (`TenantDomains:*`): every `PollSeconds` it claims and checks due domains
 * (`createDomainTicker`), at once again while batches come back full.
 */
export const tenantDomainsLoop: LoopFactory = (deps) => {
  const ticker = createDomainTicker(deps);
  const settings = deps.config.settings.TenantDomains;
  return startIntervalLoop(deps, "tenantDomains", {
    intervalMs: settings.PollSeconds * 1000,
    step: async () => (await ticker.tick()) >= settings.BatchSize,
  });
};
