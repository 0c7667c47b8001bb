import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { backupCodes, passkeys, tenantMemberships, totpFactors, users } from "../db/schema/index.ts";
import { enqueueEmail } from "../email/enqueue-email.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import type { AuthDeps } from "./deps.ts";
import { requireRecentSecondFactor } from "./step-up.ts";
import { devicesOf, revokeTrustedDevices } from "./trusted-devices.ts";

/**
 * Recovery (docs/auth.md "Recovery"): removes every second factor of a member of `ctx.tenantId` — the
 * TOTP authenticator, the backup codes and the passkeys — so they sign in with their password alone
 * (or, where the policy holds them, enrol again at the next sign-in). Tenant owners and admins reset
 * members and admins (after a fresh second factor of their own); an owner's factors only a platform
 * admin resets; nobody resets their own this way. Audited as `mfa.reset`, the member e-mailed and the
 * tenant's `mfa.reset` event emitted, in one transaction.
 */
export async function resetMemberFactors(
  deps: AuthDeps,
  ctx: TenantCtx,
  input: { userId: string },
): Promise<{ removed: string[] }> {
  const actor = ctx.actor;
  if (actor.type !== "user") throw new AppError("forbidden", "Only a person resets second factors.");
  const [member] = await withDatabase(deps, ctx, (db) =>
    db
      .select({ role: tenantMemberships.role, email: users.email, name: users.name })
      .from(tenantMemberships)
      .innerJoin(users, eq(users.id, tenantMemberships.userId))
      .where(and(eq(tenantMemberships.tenantId, ctx.tenantId), eq(tenantMemberships.userId, input.userId)))
      .limit(1),
  );
  if (!member) throw new AppError("not_found", "No such user in this tenant.");
  const platformAdmin = actor.platformRoles.length > 0;
  if (actor.userId === input.userId)
    throw new AppError("forbidden", "Remove your own factors yourself (DELETE /api/auth/mfa/totp).");
  if (member.role === "owner" && !platformAdmin)
    throw new AppError("forbidden", "An owner's second factors are reset by a platform admin.");
  if (!platformAdmin) await requireRecentSecondFactor(deps, ctx);
  return withTransaction(deps, ctx, async (tx, txCtx) => {
    const removed: string[] = [];
    const gone = async (kind: string, rows: unknown[]) => {
      if (rows.length > 0) removed.push(kind);
    };
    await gone("totp", await tx.delete(totpFactors).where(eq(totpFactors.userId, input.userId)).returning());
    await gone(
      "backup_code",
      await tx.delete(backupCodes).where(eq(backupCodes.userId, input.userId)).returning(),
    );
    await gone("passkey", await tx.delete(passkeys).where(eq(passkeys.userId, input.userId)).returning());
    // a browser trusted with the factors just removed skips nothing any more
    await revokeTrustedDevices(tx, txCtx, deps.clock.now(), {
      where: devicesOf(input.userId, ctx.tenantId),
      reason: "second factors reset",
    });
    await recordAudit(tx, txCtx, {
      action: "mfa.reset",
      target: { type: "user", id: input.userId },
      details: { removed },
    });
    await enqueueEmail(deps, txCtx, {
      tenantId: ctx.tenantId,
      to: member.email,
      template: "mfa-reset",
      data: { name: member.name || member.email },
    });
    await emitEvent(tx, enqueueContext(deps), {
      tenantId: ctx.tenantId,
      type: "mfa.reset",
      data: { userId: input.userId, removed },
    });
    return { removed };
  });
}
