import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { normaliseEmail } from "../auth/user-identity.ts";
import type { TenantCtx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { tenantInvitations, tenantRoles } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import {
  assertSeatFree,
  type InvitationDeps,
  type InvitationView,
  invitationColumns,
  invitationExpiry,
  invitationView,
  mailInvitation,
} from "./invitation-rows.ts";
import { assertMayGrant, memberWithEmail } from "./users.ts";

export const newInvitationSchema = z.object({
  email: z.email().max(320),
  role: z.enum(tenantRoles).default("member"),
});

/**
 * Invites an address into the ctx's tenant with a role (an owner or admin; only an owner invites an
 * owner): a Pending invitation whose link is mailed in the same transaction (the e-mail outbox),
 * audited and emitted (`invitation.created`). Held to the plan's `seats` (402/403). 409 when the
 * address is a member here already or has a Pending invitation (resend that one). The answer does
 * not depend on whether the address has an account elsewhere.
 */
export async function createInvitation(
  deps: InvitationDeps,
  ctx: TenantCtx,
  input: z.input<typeof newInvitationSchema>,
): Promise<InvitationView> {
  const parsed = newInvitationSchema.parse(input);
  assertMayGrant(ctx, parsed.role);
  const email = normaliseEmail(parsed.email);
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx, txCtx) => {
    await assertSeatFree(deps, txCtx, tx, now);
    if (await memberWithEmail(tx, ctx.tenantId, email))
      throw new AppError("conflict", "This address is a member of the tenant already.");
    const expiresAt = invitationExpiry(now);
    const [row] = await tx
      .insert(tenantInvitations)
      .values({
        tenantId: ctx.tenantId,
        email,
        role: parsed.role,
        invitedBy: ctx.actor.type === "user" ? ctx.actor.userId : null,
        expiresAt,
        sentAt: now,
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing()
      .returning(invitationColumns);
    if (!row) throw new AppError("conflict", "This address has a pending invitation; resend it.");
    await recordAudit(tx, txCtx, {
      action: "invitation.created",
      target: { type: "invitation", id: row.id },
      details: { email, role: parsed.role },
    });
    await emitEvent(tx, deps, {
      tenantId: ctx.tenantId,
      type: "invitation.created",
      data: { invitationId: row.id, email, role: parsed.role },
    });
    await mailInvitation(deps, txCtx, { invitationId: row.id, email, role: parsed.role, expiresAt });
    return invitationView(row, now);
  });
}
