import { eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx, TenantCtx } from "../context.ts";
import { withDatabase, withPlatformDatabase, withTransaction } from "../db/operation.ts";
import { users } from "../db/schema/identity.ts";
import { tenants } from "../db/schema/tenants.ts";
import { trustedDevices } from "../db/schema/trusted-devices.ts";
import { AppError } from "../errors.ts";
import type { AuthDeps } from "./deps.ts";
import { requireRecentSecondFactor } from "./step-up.ts";
import { revokeTrustedDevices } from "./trusted-devices.ts";
import type { Identity } from "./user-identity.ts";

export const requireMfaValues = ["off", "admins", "everyone"] as const;
export type RequireMfa = (typeof requireMfaValues)[number];

/** A tenant's second-factor policy (docs/auth.md "Policies"). */
export interface SecurityPolicy {
  requireMfa: RequireMfa;
  /** Days a member the policy holds may still sign in without a factor, from `requiredSince`. */
  enrolmentGraceDays: number;
  /** When the policy began to hold the members it holds now (null while `off`). */
  requiredSince: Date | null;
  /**
   * Whether a browser a member trusted at a sign-in step skips the step later (src/auth/trusted-devices.ts).
   * Off by default: switching it off revokes every trusted device of the tenant.
   */
  allowTrustedDevices: boolean;
}

const columns = {
  requireMfa: tenants.requireMfa,
  enrolmentGraceDays: tenants.mfaGraceDays,
  requiredSince: tenants.mfaRequiredSince,
  allowTrustedDevices: tenants.allowTrustedDevices,
};
const noSuchTenant = () => new AppError("not_found", "No such tenant.");

/** The policy of `ctx.tenantId`. */
export async function getSecurityPolicy(deps: AuthDeps, ctx: TenantCtx): Promise<SecurityPolicy> {
  const [row] = await withDatabase(deps, ctx, (db) =>
    db.select(columns).from(tenants).where(eq(tenants.id, ctx.tenantId)),
  );
  if (!row) throw noSuchTenant();
  return row;
}

const strength: Record<RequireMfa, number> = { off: 0, admins: 1, everyone: 2 };

/**
 * Changes the policy (after a fresh second factor: it is security configuration). Holding more
 * members than before (off → admins → everyone) starts their grace period now; `off` clears it.
 * Switching `allowTrustedDevices` off revokes every trusted device of the tenant in the same transaction.
 * Audited as `tenant.security_policy_changed` with the values before and after.
 */
export async function updateSecurityPolicy(
  deps: AuthDeps,
  ctx: TenantCtx,
  input: { requireMfa?: RequireMfa; enrolmentGraceDays?: number; allowTrustedDevices?: boolean },
): Promise<SecurityPolicy> {
  await requireRecentSecondFactor(deps, ctx);
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx, txCtx) => {
    const [before] = await tx.select(columns).from(tenants).where(eq(tenants.id, ctx.tenantId)).for("update");
    if (!before) throw noSuchTenant();
    const requireMfa = input.requireMfa ?? before.requireMfa;
    const requiredSince =
      requireMfa === "off"
        ? null
        : strength[requireMfa] > strength[before.requireMfa]
          ? now
          : before.requiredSince;
    const [after] = await tx
      .update(tenants)
      .set({
        requireMfa,
        mfaGraceDays: input.enrolmentGraceDays ?? before.enrolmentGraceDays,
        mfaRequiredSince: requiredSince,
        allowTrustedDevices: input.allowTrustedDevices ?? before.allowTrustedDevices,
        updatedAt: now,
      })
      .where(eq(tenants.id, ctx.tenantId))
      .returning(columns);
    if (!after) throw noSuchTenant();
    const audited = ({ requireMfa, enrolmentGraceDays, allowTrustedDevices }: SecurityPolicy) => ({
      requireMfa,
      enrolmentGraceDays,
      allowTrustedDevices,
    });
    await recordAudit(tx, txCtx, {
      action: "tenant.security_policy_changed",
      target: { type: "tenant", id: ctx.tenantId },
      details: { before: audited(before), after: audited(after) },
    });
    if (before.allowTrustedDevices && !after.allowTrustedDevices)
      await revokeTrustedDevices(tx, txCtx, now, {
        where: eq(trustedDevices.tenantId, ctx.tenantId),
        reason: "trusted devices switched off",
      });
    return after;
  });
}

/**
 * Whether a user without a second factor must enrol before this sign-in gets a session: platform
 * staff in Production once `Authentication:Mfa:StaffGraceDays` (7) have passed since the account was made; a tenant's member when its policy holds them (`everyone`, or `admins`
 * and they are an owner or admin) and the grace period since the policy began has run out.
 */
export async function enrolmentDue(deps: AuthDeps, ctx: Ctx, identity: Identity): Promise<boolean> {
  if (identity.tenantId === null) {
    if (identity.platformRoles.length === 0 || deps.config.environment !== "Production") return false;
    // staff are platform rows: read on the named platform path
    const [staff] = await withPlatformDatabase(deps, ctx, (db) =>
      db.select({ createdAt: users.createdAt }).from(users).where(eq(users.id, identity.userId)),
    );
    const graceDays = deps.config.settings.Authentication.Mfa.StaffGraceDays;
    return deps.clock.now().getTime() >= (staff?.createdAt.getTime() ?? 0) + graceDays * 86_400_000;
  }
  const tenantId = identity.tenantId;
  const [policy] = await withDatabase(deps, ctx, (db) =>
    db.select(columns).from(tenants).where(eq(tenants.id, tenantId)),
  );
  if (!policy || policy.requireMfa === "off") return false;
  const held =
    policy.requireMfa === "everyone" || identity.roles.some((role) => role === "owner" || role === "admin");
  if (!held) return false;
  const since = policy.requiredSince?.getTime() ?? 0;
  return deps.clock.now().getTime() >= since + policy.enrolmentGraceDays * 86_400_000;
}
