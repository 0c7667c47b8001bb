import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { tenantInvitations } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { type InvitationDeps, noSuchInvitation } from "./invitation-rows.ts";

/**
 * Revokes a Pending invitation of the ctx's tenant: its link stops working, its seat is free.
 * Revoking a revoked one again changes nothing; an accepted one is 409 (remove the member instead);
 * another tenant's is 404.
 */
export async function revokeInvitation(
  deps: InvitationDeps,
  ctx: TenantCtx,
  input: { invitationId: string },
): Promise<void> {
  const now = deps.clock.now();
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    const [row] = await tx
      .select({ status: tenantInvitations.status, email: tenantInvitations.email })
      .from(tenantInvitations)
      .where(and(eq(tenantInvitations.id, input.invitationId), eq(tenantInvitations.tenantId, ctx.tenantId)))
      .for("update");
    if (!row) throw noSuchInvitation();
    if (row.status === "Revoked") return;
    if (row.status === "Accepted")
      throw new AppError("conflict", "The invitation was accepted; remove the member instead.");
    await tx
      .update(tenantInvitations)
      .set({ status: "Revoked", revokedAt: now, updatedAt: now })
      .where(eq(tenantInvitations.id, input.invitationId));
    await recordAudit(tx, txCtx, {
      action: "invitation.revoked",
      target: { type: "invitation", id: input.invitationId },
      details: { email: row.email },
    });
    await emitEvent(tx, deps, {
      tenantId: ctx.tenantId,
      type: "invitation.revoked",
      data: { invitationId: input.invitationId, email: row.email },
    });
  });
}
