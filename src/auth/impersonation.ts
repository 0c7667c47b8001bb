import { and, eq, or } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { sessions, tenantMemberships, tenants, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import type { AuthDeps } from "./deps.ts";
import { callerOf, issueRefreshToken, type TokenPair, tokenPairFor } from "./sessions.ts";
import { loadIdentity } from "./user-identity.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface StartImpersonationInput {
  userId: string;
  /** The tenant's code or id. */
  tenant: string;
  /** Why (a ticket, a customer's request): kept in the audit trail. */
  reason: string;
  /** The session's lifetime, at most `Authentication:Impersonation:MaxMinutes`. */
  minutes: number;
}

/**
 * `POST /api/admin/impersonations` (platform admins; the route's access refuses viewers): opens a
 * token session as a tenant's user that lasts `minutes`, marked with the admin (`impersonator_id`;
 * its access tokens carry `act: { sub: <admin id> }`, RFC 8693 §4.1). The user must be an Active
 * member of the tenant and no platform staff. Audited in the tenant's chain and the platform's.
 */
export async function startImpersonation(
  deps: AuthDeps,
  ctx: Ctx,
  input: StartImpersonationInput,
): Promise<TokenPair> {
  const admin = callerOf(ctx);
  const max = deps.config.settings.Authentication.Impersonation.MaxMinutes;
  if (!Number.isInteger(input.minutes) || input.minutes < 1 || input.minutes > max)
    throw new AppError("validation_failed", "The request is not valid.", {
      fields: [{ path: "minutes", message: `must be a whole number from 1 to ${max}` }],
    });
  const now = deps.clock.now();
  const expiresAt = new Date(now.getTime() + input.minutes * 60_000);
  const opened = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const [tenant] = await tx
      .select({ id: tenants.id, status: tenants.status })
      .from(tenants)
      .where(
        UUID.test(input.tenant)
          ? or(eq(tenants.id, input.tenant), eq(tenants.code, input.tenant.toLowerCase()))
          : eq(tenants.code, input.tenant.toLowerCase()),
      )
      .limit(1);
    if (!tenant) throw new AppError("not_found", "No such tenant.");
    const [member] = UUID.test(input.userId)
      ? await tx
          .select({ userId: tenantMemberships.userId })
          .from(tenantMemberships)
          .innerJoin(users, eq(users.id, tenantMemberships.userId))
          .where(
            and(
              eq(tenantMemberships.tenantId, tenant.id),
              eq(tenantMemberships.userId, input.userId),
              eq(users.status, "Active"),
            ),
          )
          .limit(1)
      : [];
    if (!member) throw new AppError("not_found", "No active user of this tenant has this id.");
    // the user as they are in that tenant: its role there, Active only as an Active member
    const identity = await loadIdentity(tx, member.userId, tenant.id);
    if (!identity || identity.status !== "Active")
      throw new AppError("not_found", "No active user of this tenant has this id.");
    if (identity.platformRoles.length > 0)
      throw new AppError("forbidden", "Platform staff cannot be impersonated.");
    if (member.userId === admin.userId) throw new AppError("forbidden", "You cannot impersonate yourself.");
    const [session] = await tx
      .insert(sessions)
      .values({
        userId: member.userId,
        tenantId: tenant.id,
        kind: "token",
        createdAt: now,
        lastUsedAt: now,
        expiresAt,
        userAgent: ctx.userAgent ?? null,
        clientIp: ctx.clientIp ?? null,
        impersonatorId: admin.userId,
        impersonationReason: input.reason,
      })
      .returning({ id: sessions.id });
    if (!session) throw new Error("session insert returned nothing");
    const event = {
      action: "auth.impersonation_started",
      target: { type: "user", id: member.userId },
      details: { reason: input.reason, expiresAt, sessions: [session.id] },
    } as const;
    await recordAudit(tx, txCtx, { ...event, tenantId: tenant.id });
    await recordAudit(tx, txCtx, { ...event, tenantId: null });
    return {
      sessionId: session.id,
      identity,
      refreshToken: await issueRefreshToken(tx, session.id, expiresAt),
    };
  });
  return tokenPairFor(
    deps,
    { ...opened.identity, tenantId: opened.identity.tenantId },
    opened.sessionId,
    opened.refreshToken,
    {
      impersonatorId: admin.userId,
    },
  );
}
