import { z } from "zod";
import { AUDIT_PRUNE, auditPruneWorker } from "../audit/prune-job.ts";
import { AUDIT_CHECKPOINT, type CheckpointDeps, writeAuditCheckpoint } from "../audit/write-checkpoint.ts";
import { billingJobs } from "../billing/notifications.ts";
import { systemCtx } from "../context.ts";
import type { Deps } from "../deps.ts";
import { emailPruneSchedule, emailPruneWorker } from "../email/prune-outbox.ts";
import { emailJobs } from "../email/send-email.ts";
import type { JobWorker } from "../jobs/registry.ts";
import { createJobRegistry, systemNoop } from "../jobs/registry.ts";
import { defineSchedule, type ScheduleDefinition } from "../jobs/schedules.ts";
import { checkpointStoreOf } from "../storage/audit-checkpoints.ts";
import { tenantDeleteWorker } from "../tenant-lifecycle/deletion.ts";
import { tenantExportWorker } from "../tenant-lifecycle/exports.ts";
import { pruneSchedule, webhookJobs } from "../webhooks/delivery-prune.ts";
import { type Background, startBackground } from "./background.ts";
import { schedulesLoop } from "./schedules-loop.ts";
import { subscriptionsLoop } from "./subscriptions-loop.ts";
import { tenantDomainsLoop } from "./tenant-domains-loop.ts";
import { usageReconciliationLoop } from "./usage-reconciliation-loop.ts";

/** Audit retention (docs/audit.md): the `audit.prune` job, seeded to run daily at 03:17 UTC. */
export const AUDIT_PRUNE_SCHEDULE = defineSchedule(AUDIT_PRUNE, { cron: "17 3 * * *", kind: AUDIT_PRUNE });

/** The `audit.checkpoint` job: a signed checkpoint to the configured store (nothing when off). */
export const auditCheckpointWorker: JobWorker<CheckpointDeps> = {
  kind: { kind: AUDIT_CHECKPOINT, schema: z.object({}).passthrough() },
  handle: async (deps) => {
    await writeAuditCheckpoint(deps, systemCtx("audit-checkpoint"), checkpointStoreOf(deps.config.settings));
  },
};

/**
 * Audit checkpoints (docs/audit.md): the `audit.checkpoint` job on `Audit:Checkpoints:Cron`, seeded
 * only when a signing key is configured (the job does nothing without one).
 */
export const auditCheckpointSchedule = (deps: Pick<Deps, "config">) => {
  const { SigningKey, Cron } = deps.config.settings.Audit.Checkpoints;
  return SigningKey ? [defineSchedule(AUDIT_CHECKPOINT, { cron: Cron, kind: AUDIT_CHECKPOINT })] : [];
};

/** Plinth's own job workers, the ones an API process runs. */
export const API_JOB_WORKERS = [
  ...billingJobs,
  ...webhookJobs,
  ...emailJobs,
  emailPruneWorker,
  auditPruneWorker,
  auditCheckpointWorker,
  tenantExportWorker,
  tenantDeleteWorker,
];

/** The job kinds an API process has a handler for (`system.noop` included): what a schedule may enqueue. */
export const API_JOB_KINDS: readonly string[] = [systemNoop.kind, ...API_JOB_WORKERS.map((w) => w.kind.kind)];

/** The schedules an API process seeds (the schedules loop): Plinth's own daily upkeep jobs. */
export function apiSchedules(deps: Pick<Deps, "config">): ScheduleDefinition[] {
  return [pruneSchedule, AUDIT_PRUNE_SCHEDULE, emailPruneSchedule, ...auditCheckpointSchedule(deps)];
}

/**
 * The background work of an API process (src/lifecycle.ts, under Bun and Deno alike): the job
 * loop with Plinth's own job workers, each bound to this process's deps (webhook deliveries among
 * them), and the tenant-domain, subscription, usage reconciliation and schedules loops, each as
 * its settings allow.
 */
export function startApiBackground(deps: Deps): Promise<Background> {
  return startBackground(deps, {
    registry: createJobRegistry().add<Deps>(deps, API_JOB_WORKERS),
    loops: {
      tenantDomains: tenantDomainsLoop,
      subscriptions: subscriptionsLoop(),
      usageReconciliation: usageReconciliationLoop(),
      schedules: schedulesLoop({
        schedules: apiSchedules(deps),
      }),
    },
  });
}
