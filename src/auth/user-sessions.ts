import { and, desc, eq, gt, isNull, ne, type SQL } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx, TenantCtx } from "../context.ts";
import { creationOrder } from "../db/keyset.ts";
import {
  type DatabaseDeps,
  withTenantOrPlatformDatabase,
  withTransactionOrPlatform,
} from "../db/operation.ts";
import { sessions, tenantMemberships, users } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import {
  createdAtPosition,
  cursorCodec,
  type Page,
  type PageRequest,
  pageByCreation,
} from "../pagination.ts";
import { callerOf, endSessions } from "./sessions.ts";
import { devicesOf, revokeTrustedDevices } from "./trusted-devices.ts";

export type UserSessionDeps = DatabaseDeps & Pick<Deps, "clock" | "sessionCache">;

/** One open session as its user sees it. */
export interface UserSessionView {
  id: string;
  kind: "token" | "browser";
  createdAt: Date;
  lastUsedAt: Date;
  expiresAt: Date;
  /** The `User-Agent` that signed in (at most 512 characters), or null. */
  client: string | null;
  /** The client address that signed in, or null. */
  address: string | null;
  /** The session this request is made with. */
  current: boolean;
  /** Set on an impersonation: the platform admin acting as the user. */
  impersonatorId: string | null;
}

/** Where a page of sessions ends: the last one's creation time (PostgreSQL's exact text) and id. */
export const sessionCursor = cursorCodec(createdAtPosition);

const open = (now: Date): SQL | undefined => and(isNull(sessions.revokedAt), gt(sessions.expiresAt, now));

/** The caller's open sessions, newest first, a page at a time. */
export async function listUserSessions(
  deps: UserSessionDeps,
  ctx: Ctx,
  input: PageRequest,
): Promise<Page<UserSessionView>> {
  const caller = callerOf(ctx);
  const after = sessionCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(sessions, "desc", after);
  const rows = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({
        id: sessions.id,
        kind: sessions.kind,
        createdAt: sessions.createdAt,
        lastUsedAt: sessions.lastUsedAt,
        expiresAt: sessions.expiresAt,
        client: sessions.userAgent,
        address: sessions.clientIp,
        impersonatorId: sessions.impersonatorId,
        position: keyset.position,
      })
      .from(sessions)
      .where(and(eq(sessions.userId, caller.userId), open(deps.clock.now()), keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  return pageByCreation(
    rows,
    input.limit,
    (row) => ({ ...row, current: row.id === caller.sessionId }),
    sessionCursor,
  );
}

/** One open session in a tenant, as the console's tenant page shows it. */
export interface TenantSessionView {
  id: string;
  userId: string;
  email: string;
  kind: "token" | "browser";
  createdAt: Date;
  lastUsedAt: Date;
  client: string | null;
  address: string | null;
  impersonatorId: string | null;
}

/** The open sessions in the ctx's tenant, most recently used first, at most `limit`. */
export async function listTenantSessions(
  deps: UserSessionDeps,
  ctx: TenantCtx,
  input: { limit: number },
): Promise<TenantSessionView[]> {
  return withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({
        id: sessions.id,
        userId: sessions.userId,
        email: users.email,
        kind: sessions.kind,
        createdAt: sessions.createdAt,
        lastUsedAt: sessions.lastUsedAt,
        client: sessions.userAgent,
        address: sessions.clientIp,
        impersonatorId: sessions.impersonatorId,
      })
      .from(sessions)
      .innerJoin(users, eq(users.id, sessions.userId))
      .where(and(eq(sessions.tenantId, ctx.tenantId), open(deps.clock.now())))
      .orderBy(desc(sessions.lastUsedAt), desc(sessions.id))
      .limit(input.limit),
  );
}

/** Ends sessions matching `where` and records each; evicted at once on every API process. */
async function endMatching(
  deps: UserSessionDeps,
  ctx: Ctx,
  where: SQL | undefined,
  input: {
    reason: string;
    evict: { sessionId: string } | { userId: string };
    /** The trusted devices that end with the sessions (signing out everywhere), if any. */
    devices?: SQL | undefined;
  },
): Promise<number> {
  const now = deps.clock.now();
  return withTransactionOrPlatform(deps, ctx, async (tx, txCtx) => {
    if (input.devices)
      await revokeTrustedDevices(tx, txCtx, now, { where: input.devices, reason: input.reason });
    const ended = await tx
      .update(sessions)
      .set({ revokedAt: now, revokedReason: input.reason })
      .where(and(where, isNull(sessions.revokedAt)))
      .returning({ id: sessions.id, tenantId: sessions.tenantId, userId: sessions.userId });
    for (const session of ended)
      await recordAudit(tx, txCtx, {
        action: "auth.session_ended",
        target: { type: "session", id: session.id },
        details: { reason: input.reason, userId: session.userId },
        tenantId: session.tenantId,
      });
    if (ended.length > 0) await endSessions(deps, txCtx, input.evict);
    return ended.length;
  });
}

/** `DELETE /api/auth/sessions/{id}`: ends one of the caller's own sessions (another's is 404). */
export async function endUserSession(
  deps: UserSessionDeps,
  ctx: Ctx,
  input: { sessionId: string },
): Promise<void> {
  const caller = callerOf(ctx);
  const ended = await endMatching(
    deps,
    ctx,
    and(eq(sessions.id, input.sessionId), eq(sessions.userId, caller.userId), open(deps.clock.now())),
    { reason: "ended by its user", evict: { sessionId: input.sessionId } },
  );
  if (ended === 0) throw new AppError("not_found", "No open session of yours has this id.");
}

/** `DELETE /api/auth/sessions`: ends every session of the caller but the one this request uses. */
export async function endOtherUserSessions(deps: UserSessionDeps, ctx: Ctx): Promise<{ ended: number }> {
  const caller = callerOf(ctx);
  const ended = await endMatching(
    deps,
    ctx,
    and(eq(sessions.userId, caller.userId), ne(sessions.id, caller.sessionId)),
    {
      reason: "ended by its user (all others)",
      evict: { userId: caller.userId },
      devices: devicesOf(caller.userId, ctx.tenantId),
    },
  );
  return { ended };
}

/**
 * `DELETE /api/tenant/users/{id}/sessions` (owners, admins) and its platform twin: ends every
 * session a member of the ctx tenant has in it; a user who is not a member is 404, as another
 * tenant's user is. Only an owner (or a platform admin) ends an owner's sessions.
 */
export async function endMemberSessions(
  deps: UserSessionDeps,
  ctx: TenantCtx,
  input: { userId: string },
): Promise<{ ended: number }> {
  const [member] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({ userId: tenantMemberships.userId, role: tenantMemberships.role })
      .from(tenantMemberships)
      .where(and(eq(tenantMemberships.tenantId, ctx.tenantId), eq(tenantMemberships.userId, input.userId)))
      .limit(1),
  );
  if (!member) throw new AppError("not_found");
  const actor = ctx.actor;
  // a key acts on members only, as it creates and disables members only (docs/api-keys.md)
  if (actor.type === "apiKey" && member.role !== "member")
    throw new AppError("forbidden", "An API key ends members' sessions only.");
  if (
    member.role === "owner" &&
    actor.type === "user" &&
    actor.platformRoles.length === 0 &&
    !actor.roles.includes("owner")
  )
    throw new AppError("forbidden", "Only an owner ends an owner's sessions.");
  const ended = await endMatching(
    deps,
    ctx,
    and(eq(sessions.userId, input.userId), eq(sessions.tenantId, ctx.tenantId)),
    {
      reason: "ended by a tenant administrator",
      evict: { userId: input.userId },
      devices: devicesOf(input.userId, ctx.tenantId),
    },
  );
  return { ended };
}
