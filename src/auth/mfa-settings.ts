import { eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { withTenantOrPlatformDatabase, withTransactionOrPlatform } from "../db/operation.ts";
import { totpFactors } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { backupCodesLeft, replaceBackupCodes } from "./backup-codes.ts";
import type { AuthDeps } from "./deps.ts";
import { enrolledMethods, hasSecondFactor } from "./second-factors.ts";
import { callerOf } from "./sessions.ts";
import { requireRecentSecondFactor } from "./step-up.ts";
import { removeTotp, startTotpEnrolment } from "./totp-factor.ts";

/** The caller's second factors: what a sign-in step would offer, TOTP's state, backup codes left. */
export async function getMfaStatus(
  deps: AuthDeps,
  ctx: Ctx,
): Promise<{ methods: string[]; totp: "none" | "pending" | "enrolled"; backupCodesLeft: number }> {
  const { userId } = callerOf(ctx);
  return withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, async (db) => {
    const [totp] = await db
      .select({ confirmedAt: totpFactors.confirmedAt })
      .from(totpFactors)
      .where(eq(totpFactors.userId, userId));
    return {
      methods: await enrolledMethods(db, userId, ctx.tenantId),
      totp: !totp ? "none" : totp.confirmedAt ? "enrolled" : "pending",
      backupCodesLeft: await backupCodesLeft(db, userId),
    };
  });
}

/** `POST /api/auth/mfa/totp`: a new enrolment; a user with a second factor steps up first. */
export async function enrolTotp(deps: AuthDeps, ctx: Ctx): Promise<{ uri: string; qrSvg: string }> {
  await requireRecentSecondFactor(deps, ctx);
  return startTotpEnrolment(deps, ctx);
}

/** `DELETE /api/auth/mfa/totp`: removes the authenticator after a fresh second factor. */
export async function disableTotp(deps: AuthDeps, ctx: Ctx): Promise<void> {
  await requireRecentSecondFactor(deps, ctx);
  await removeTotp(deps, ctx);
}

/**
 * `POST /api/auth/mfa/backup-codes`: a new set of ten after a fresh second factor (the old ones stop
 * working); 409 for a user without a second factor (codes stand in for one, never alone).
 */
export async function regenerateBackupCodes(deps: AuthDeps, ctx: Ctx): Promise<{ backupCodes: string[] }> {
  const { userId } = callerOf(ctx);
  await requireRecentSecondFactor(deps, ctx);
  const codes = await withTransactionOrPlatform(deps, ctx, async (tx) => {
    if (!(await hasSecondFactor(tx, userId, ctx.tenantId)))
      throw new AppError("conflict", "Enrol a second factor first; backup codes come with it.");
    const issued = await replaceBackupCodes(tx, userId, deps.clock.now());
    await recordAudit(tx, ctx, {
      action: "mfa.backup_codes_regenerated",
      target: { type: "user", id: userId },
    });
    return issued;
  });
  return { backupCodes: codes };
}
