import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { tenantInvitations } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import {
  assertSeatFree,
  type InvitationDeps,
  type InvitationView,
  invitationColumns,
  invitationExpiry,
  invitationView,
  mailInvitation,
  noSuchInvitation,
} from "./invitation-rows.ts";

/**
 * Mails a Pending invitation again with a new link (the old one stops working) and a new expiry; an
 * expired one is revived, and so takes a seat again (402/403 as on creation). An accepted or revoked
 * one is 409; another tenant's is 404.
 */
export async function resendInvitation(
  deps: InvitationDeps,
  ctx: TenantCtx,
  input: { invitationId: string },
): Promise<InvitationView> {
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx, txCtx) => {
    const where = and(
      eq(tenantInvitations.id, input.invitationId),
      eq(tenantInvitations.tenantId, ctx.tenantId),
    );
    const [row] = await tx.select(invitationColumns).from(tenantInvitations).where(where).for("update");
    if (!row) throw noSuchInvitation();
    if (row.status !== "Pending")
      throw new AppError(
        "conflict",
        `The invitation is ${row.status.toLowerCase()}; invite the address again.`,
      );
    if (row.expiresAt <= now) await assertSeatFree(deps, txCtx, tx, now);
    const expiresAt = invitationExpiry(now);
    const [updated] = await tx
      .update(tenantInvitations)
      .set({ expiresAt, sentAt: now, updatedAt: now })
      .where(where)
      .returning(invitationColumns);
    if (!updated) throw noSuchInvitation();
    await recordAudit(tx, txCtx, {
      action: "invitation.resent",
      target: { type: "invitation", id: row.id },
      details: { email: row.email },
    });
    await mailInvitation(deps, txCtx, { invitationId: row.id, email: row.email, role: row.role, expiresAt });
    return invitationView(updated, now);
  });
}
