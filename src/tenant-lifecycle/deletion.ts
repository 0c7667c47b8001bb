/**
 * Scheduling a tenant's deletion and canceling it (docs/tenant-lifecycle.md). The schedule lives on
 * the tenant's row; the `tenant.delete` job, enqueued to run when the grace ends, reads it again and
 * does nothing if the deletion was canceled meanwhile.
 */
import { sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { type Ctx, systemCtx } from "../context.ts";
import { execute } from "../db/client.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { enqueue, enqueueContext } from "../jobs/enqueue.ts";
import { jobWorker } from "../jobs/registry.ts";
import { type DeletionDeps, deleteTenantData, tenantDeleteJob } from "./delete-tenant-data.ts";
import { requesterOf } from "./exports.ts";

export type ScheduleDeps = Pick<Deps, "database" | "clock" | "config">;

export interface TenantDeletionView {
  tenantId: string;
  scheduledFor: string;
}

const noSuchTenant = () => new AppError("not_found", "No such tenant.");

/** Schedules (or moves) the tenant's deletion `graceDays` from now (default `Tenancy:DeletionGraceDays`). */
export async function scheduleTenantDeletion(
  deps: ScheduleDeps,
  ctx: Ctx,
  input: { tenantId: string; graceDays?: number | undefined },
): Promise<TenantDeletionView> {
  const graceDays = input.graceDays ?? deps.config.settings.Tenancy.DeletionGraceDays;
  const scheduledFor = new Date(deps.clock.now().getTime() + graceDays * 86_400_000);
  return withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const [row] = await execute<{ id: string }>(
      tx,
      sql`update tenants set deletion_scheduled_for = ${scheduledFor.toISOString()}::timestamptz,
            deletion_requested_by = ${requesterOf(ctx)}
          where id::text = ${input.tenantId.toLowerCase()} returning id`,
    );
    if (!row) throw noSuchTenant();
    await enqueue(
      tx,
      enqueueContext(deps),
      tenantDeleteJob,
      { tenantId: row.id },
      {
        runAfter: scheduledFor,
        groupKey: "tenant-lifecycle",
      },
    );
    // in the platform chain: the tenant's own chain goes with it
    await recordAudit(tx, ctx, {
      action: "tenant.deletion_scheduled",
      target: { type: "tenant", id: row.id },
      tenantId: null,
      details: { graceDays, scheduledFor: scheduledFor.toISOString() },
    });
    return { tenantId: row.id, scheduledFor: scheduledFor.toISOString() };
  });
}

/** Cancels a scheduled deletion that has not started; 404 when none is scheduled. */
export async function cancelTenantDeletion(
  deps: ScheduleDeps,
  ctx: Ctx,
  input: { tenantId: string },
): Promise<void> {
  await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const [row] = await execute<{ id: string; was: string; status: string }>(
      tx,
      sql`update tenants t set deletion_scheduled_for = null, deletion_requested_by = null
          from (select id, deletion_scheduled_for::text as was from tenants where id::text = ${input.tenantId.toLowerCase()} for update) old
          where t.id = old.id and old.was is not null and t.deletion_counts is null
          returning t.id, old.was, t.status`,
    );
    if (!row) throw new AppError("not_found", "No deletion of this tenant is scheduled (or it has started).");
    await recordAudit(tx, ctx, {
      action: "tenant.deletion_canceled",
      target: { type: "tenant", id: row.id },
      tenantId: null,
      details: { scheduledFor: new Date(row.was).toISOString() },
    });
  });
}

/** The job's handler: registered by every process that runs the job loop. */
export const tenantDeleteWorker = jobWorker(tenantDeleteJob, async (deps: DeletionDeps, payload, job) => {
  await deleteTenantData(deps, systemCtx("tenant-deletion"), {
    tenantId: payload.tenantId,
    signal: job.signal,
  });
});
