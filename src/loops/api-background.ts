import { z } from "zod";
import { pruneAuditEvents } from "../audit/retention.ts";
import { billingJobs } from "../billing/notifications.ts";
import { systemCtx } from "../context.ts";
import type { Deps } from "../deps.ts";
import { createJobRegistry, defineJob, type JobDefinition } from "../jobs/registry.ts";
import { defineSchedule } from "../jobs/schedules.ts";
import { pruneSchedule, webhookJobs } from "../webhooks/deliveries.ts";
import { type Background, startBackground } from "./background.ts";
import { schedulesLoop } from "./schedules-loop.ts";
import { subscriptionsLoop } from "./subscriptions-loop.ts";
import { tenantDomainsLoop } from "./tenant-domains-loop.ts";
import { usageReconciliationLoop } from "./usage-reconciliation-loop.ts";

/**
 * The background work of an API process (src/lifecycle.ts, under Bun and Deno alike):
 * the job loop with Plinth's own job kinds (webhook deliveries among them), and the tenant-domain, subscription, usage
 * reconciliation and schedules loops, each as its settings allow.
 */
export function startApiBackground(deps: Deps): Promise<Background> {
  return startBackground(deps, {
    registry: createJobRegistry([...billingJobs(deps.logger), ...webhookJobs(deps), auditPruneJob(deps)]),
    loops: {
      tenantDomains: tenantDomainsLoop,
      subscriptions: subscriptionsLoop(),
      usageReconciliation: usageReconciliationLoop(),
      schedules: schedulesLoop({ schedules: [pruneSchedule, AUDIT_PRUNE_SCHEDULE] }),
    },
  });
}

export const AUDIT_PRUNE = "audit.prune";

/** Audit retention (`Audit:RetentionDays`, docs/audit.md): a job kind, seeded to run daily at 03:17 UTC. */
export const AUDIT_PRUNE_SCHEDULE = defineSchedule(AUDIT_PRUNE, { cron: "17 3 * * *", kind: AUDIT_PRUNE });

export function auditPruneJob(deps: Deps): JobDefinition {
  return defineJob(AUDIT_PRUNE, z.object({}).passthrough(), async () => {
    await pruneAuditEvents(deps, systemCtx("audit-retention"));
  });
}
