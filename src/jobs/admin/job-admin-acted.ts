import { type AuditAction, recordAudit } from "../../audit/record.ts";
import type { Ctx } from "../../context.ts";
import type { Tx } from "../../db/client.ts";
import { withTenantOrPlatformTransaction } from "../../db/operation.ts";
import { describeFilter, type JobFilter } from "./job-filter.ts";
import type { JobAdminDeps } from "./job-view.ts";

/** What an admin did to jobs, as `jobAdminActed` records it. */
export interface JobAdminAction {
  action: "cancel" | "retry" | "bulk-cancel" | "bulk-retry" | "set-priority" | (string & {});
  /** The job acted on (single actions). */
  jobId?: number;
  /** The filter of a bulk action. */
  filter?: JobFilter;
  /** Jobs changed. */
  count: number;
  /** What else the action set (e.g. the new priority). */
  detail?: Record<string, unknown>;
}

/** The audit action of each job admin action. */
const AUDITED: Record<string, AuditAction> = {
  retry: "job.retried",
  "bulk-retry": "job.retried",
  cancel: "job.canceled",
  "bulk-cancel": "job.canceled",
  "set-priority": "job.priority_changed",
};

/**
 * The one place an admin action on jobs is recorded: a structured `job admin action` log line with
 * the actor, the action, the job id or the filter, and the count, and its audit row (docs/audit.md)
 * in the change's transaction when the ctx carries one, else in its own.
 */
export async function jobAdminActed(
  deps: Pick<JobAdminDeps, "logger" | "database">,
  ctx: Ctx,
  input: JobAdminAction,
): Promise<void> {
  const actor =
    ctx.actor.type === "user"
      ? { type: "user", userId: ctx.actor.userId }
      : ctx.actor.type === "system"
        ? { type: "system", name: ctx.actor.name }
        : { type: "anonymous" };
  deps.logger.info("job admin action", {
    actor,
    action: input.action,
    ...(input.jobId !== undefined ? { jobId: input.jobId } : {}),
    ...(input.filter ? { filter: describeFilter(input.filter) } : {}),
    count: input.count,
    ...(input.detail ? { detail: input.detail } : {}),
    ...(ctx.requestId ? { requestId: ctx.requestId } : {}),
  });
  const record = (tx: Tx) =>
    recordAudit(tx, ctx, {
      action: AUDITED[input.action] ?? "job.retried",
      target: input.jobId === undefined ? null : { type: "job", id: String(input.jobId) },
      details: {
        count: input.count,
        jobKind: input.detail?.jobKind,
        value: input.detail?.priority,
        reason: input.filter ? `bulk ${input.action.replace("bulk-", "")}` : undefined,
        status: input.filter?.status,
        kind: input.filter?.kind,
      },
    });
  // in the change's transaction when the ctx carries one, else in its own in the chain's context
  await (ctx.tx ? record(ctx.tx) : withTenantOrPlatformTransaction(deps, ctx, ctx.tenantId, record));
}
