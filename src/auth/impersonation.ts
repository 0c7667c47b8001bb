import { and, asc, eq, gt, isNull, or } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { withPlatformDatabase, withPlatformTransaction } from "../db/operation.ts";
import { sessions, tenantMemberships, tenants, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { isUuid } from "../uuid.ts";
import type { AuthDeps } from "./deps.ts";
import { callerOf, endSessions, issueRefreshToken, type TokenPair, tokenPairFor } from "./sessions.ts";
import { loadIdentity } from "./user-identity.ts";

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
  // the named platform path: a platform admin's act that finds the tenant by id or code and writes
  // in it and in the platform's audit chain, in one transaction
  const opened = await withPlatformTransaction(deps, ctx, async (tx, txCtx) => {
    const [tenant] = await tx
      .select({ id: tenants.id, status: tenants.status })
      .from(tenants)
      .where(
        isUuid(input.tenant)
          ? or(eq(tenants.id, input.tenant), eq(tenants.code, input.tenant.toLowerCase()))
          : eq(tenants.code, input.tenant.toLowerCase()),
      )
      .limit(1);
    if (!tenant) throw new AppError("not_found", "No such tenant.");
    const [member] = isUuid(input.userId)
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
    if (identity?.status !== "Active")
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
    // the user did not authenticate: the admin did, with their own session's methods, not stated here
    { impersonatorId: admin.userId, auth: { amr: [], authTime: now } },
  );
}

/** An impersonation a platform admin has open (the console's banner). */
export interface OpenImpersonation {
  sessionId: string;
  userId: string;
  userEmail: string;
  tenantId: string | null;
  tenantCode: string | null;
  reason: string | null;
  expiresAt: Date;
}

/** The caller's open impersonation sessions, soonest to end first (at most 20). */
export async function listOpenImpersonations(deps: AuthDeps, ctx: Ctx): Promise<OpenImpersonation[]> {
  const admin = callerOf(ctx);
  const now = deps.clock.now();
  // the platform path: the admin's impersonations span tenants
  return withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({
        sessionId: sessions.id,
        userId: sessions.userId,
        userEmail: users.email,
        tenantId: sessions.tenantId,
        tenantCode: tenants.code,
        reason: sessions.impersonationReason,
        expiresAt: sessions.expiresAt,
      })
      .from(sessions)
      .innerJoin(users, eq(users.id, sessions.userId))
      .leftJoin(tenants, eq(tenants.id, sessions.tenantId))
      .where(
        and(
          eq(sessions.impersonatorId, admin.userId),
          isNull(sessions.revokedAt),
          gt(sessions.expiresAt, now),
        ),
      )
      .orderBy(asc(sessions.expiresAt))
      .limit(20),
  );
}

/** Ends one of the caller's impersonation sessions (another's, or none, is 404); at once everywhere. */
export async function endImpersonation(
  deps: AuthDeps,
  ctx: Ctx,
  input: { sessionId: string },
): Promise<void> {
  const admin = callerOf(ctx);
  const now = deps.clock.now();
  // the platform path, as startImpersonation: the tenant's session and the platform's audit chain
  await withPlatformTransaction(deps, ctx, async (tx, txCtx) => {
    const [ended] = await tx
      .update(sessions)
      .set({ revokedAt: now, revokedReason: "impersonation ended" })
      .where(
        and(
          eq(sessions.id, input.sessionId),
          eq(sessions.impersonatorId, admin.userId),
          isNull(sessions.revokedAt),
        ),
      )
      .returning({ id: sessions.id, tenantId: sessions.tenantId, userId: sessions.userId });
    if (!ended) throw new AppError("not_found", "No open impersonation of yours has this id.");
    await recordAudit(tx, txCtx, {
      action: "auth.session_ended",
      target: { type: "session", id: ended.id },
      details: { reason: "impersonation ended", userId: ended.userId },
      tenantId: ended.tenantId,
    });
    await endSessions(deps, txCtx, { sessionId: ended.id });
  });
}
