import { billingJobs } from "../billing/notifications.ts";
import type { Deps } from "../deps.ts";
import { createJobRegistry } from "../jobs/registry.ts";
import { type Background, startBackground } from "./background.ts";
import { schedulesLoop } from "./schedules-loop.ts";
import { subscriptionsLoop } from "./subscriptions-loop.ts";
import { tenantDomainsLoop } from "./tenant-domains-loop.ts";
import { usageReconciliationLoop } from "./usage-reconciliation-loop.ts";

/**
 * The background work of an API process (src/lifecycle.ts, under Bun and Deno alike):
 * the job loop with Plinth's own job kinds, and the tenant-domain, subscription, usage
 * reconciliation and schedules loops, each as its settings allow.
 */
export function startApiBackground(deps: Deps): Promise<Background> {
  return startBackground(deps, {
    registry: createJobRegistry([...billingJobs(deps.logger)]),
    loops: {
      tenantDomains: tenantDomainsLoop,
      subscriptions: subscriptionsLoop(),
      usageReconciliation: usageReconciliationLoop(),
      schedules: schedulesLoop(),
    },
  });
}
