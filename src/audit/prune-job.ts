import { z } from "zod";
import { systemCtx } from "../context.ts";
import type { JobWorker } from "../jobs/registry.ts";
import { type AuditRetentionDeps, pruneAuditEvents } from "./retention.ts";

export const AUDIT_PRUNE = "audit.prune";

/**
 * Audit retention (`Audit:RetentionDays`, docs/audit.md) as a job kind with its handler, enqueued
 * daily by its schedule. Written as a literal rather than with `jobWorker(jobKind(…))`: src/jobs/
 * records audit events itself, so audit code imports only its types (the registry checks the kind
 * when a process registers the worker).
 */
export const auditPruneWorker: JobWorker<AuditRetentionDeps> = {
  kind: { kind: AUDIT_PRUNE, schema: z.object({}).passthrough() },
  handle: async (deps) => {
    await pruneAuditEvents(deps, systemCtx("audit-retention"));
  },
};
