import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { requireRecentSecondFactor } from "../auth/step-up.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { tenantMemberships, tenantSsoSettings } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { isUuid } from "../tenancy/tenants.ts";
import type { SsoDeps } from "./sso-deps.ts";

export interface SsoEnforcement {
  enforced: boolean;
  breakGlassUserId: string | null;
}

/**
 * Turns SSO enforcement on or off for the ctx tenant (`PUT /api/tenant/sso/enforcement`): while on,
 * password and e-mail-code sign-in are refused for addresses of its verified domains
 * (src/auth/sso-enforcement.ts), except the break-glass owner: `breakGlassUserId`, by default the
 * owner turning it on; it must be an Active owner of the tenant (404 otherwise). 402 without `sso`.
 */
export async function setSsoEnforcement(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { enforced: boolean; breakGlassUserId?: string },
): Promise<SsoEnforcement> {
  await requireRecentSecondFactor(deps, ctx);
  await assertFeature(deps, ctx, { feature: "sso" });
  const caller = ctx.actor.type === "user" ? ctx.actor.userId : null;
  const breakGlassUserId = input.enforced ? (input.breakGlassUserId ?? caller) : null;
  // a reference to a user the tenant has no Active owner by: 404, as a path id would be
  const refuse = () =>
    new AppError("not_found", "No Active owner of this tenant has this id (breakGlassUserId).");
  if (breakGlassUserId !== null) {
    if (!isUuid(breakGlassUserId)) throw refuse();
    const [owner] = await withDatabase(deps, ctx, (db) =>
      db
        .select({ userId: tenantMemberships.userId })
        .from(tenantMemberships)
        .where(
          and(
            eq(tenantMemberships.tenantId, ctx.tenantId),
            eq(tenantMemberships.userId, breakGlassUserId),
            eq(tenantMemberships.role, "owner"),
            eq(tenantMemberships.status, "Active"),
          ),
        ),
    );
    if (!owner) throw refuse();
  }
  const now = deps.clock.now();
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    await tx
      .insert(tenantSsoSettings)
      .values({
        tenantId: ctx.tenantId,
        enforced: input.enforced,
        breakGlassUserId,
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoUpdate({
        target: tenantSsoSettings.tenantId,
        set: { enforced: input.enforced, breakGlassUserId, updatedAt: now },
      });
    await recordAudit(tx, txCtx, {
      action: "sso.enforcement_changed",
      target: { type: "tenant", id: ctx.tenantId },
      details: { enforced: input.enforced, breakGlassUserId },
    });
  });
  return { enforced: input.enforced, breakGlassUserId };
}

/** The ctx tenant's enforcement as it stands (off when never set): what the console's SSO page shows. */
export async function getSsoEnforcement(deps: SsoDeps, ctx: TenantCtx): Promise<SsoEnforcement> {
  const [row] = await withDatabase(deps, ctx, (db) =>
    db
      .select({ enforced: tenantSsoSettings.enforced, breakGlassUserId: tenantSsoSettings.breakGlassUserId })
      .from(tenantSsoSettings)
      .where(eq(tenantSsoSettings.tenantId, ctx.tenantId)),
  );
  return row ?? { enforced: false, breakGlassUserId: null };
}
