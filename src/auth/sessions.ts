import { and, eq, isNull } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import {
  type DatabaseDeps,
  withDatabase,
  withPlatformDatabase,
  withTenantOrPlatformTransaction,
  withTransactionOrPlatform,
} from "../db/operation.ts";
import { refreshTokens, sessions, tenantMemberships, users } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import type { AuthDeps } from "./deps.ts";
import { opaqueToken, tokenHash } from "./opaque-tokens.ts";
import { authOf, type SessionAuth, sessionAuthOf } from "./session-auth.ts";
import { announceSessionChange, type SessionChange } from "./session-cache.ts";
import type { AccessClaims } from "./tokens.ts";
import { type Identity, loadIdentity } from "./user-identity.ts";

export interface TokenPair {
  accessToken: string;
  tokenType: "Bearer";
  expiresIn: number;
  refreshToken: string;
  passwordChangeRequired: boolean;
}

/**
 * A verified sign-in: the identity, and what was seen of the user row when the credential was
 * checked (the password hash that matched; absent for an SMS code, which proves the phone).
 */
export interface SignIn {
  identity: Identity;
  seenPasswordHash?: string;
  /** The request that signed in (its address and agent go into the audit event). */
  ctx: Ctx;
  /** How: a credential, a switch from another tenant's session, an accepted invitation. */
  method:
    | "password"
    | "sms"
    | "passkey"
    | "email_code"
    | "email_link"
    | "switch"
    | "invitation"
    | "signup"
    | "sso";
  /**
   * How the user authenticated (RFC 8176) and when, when not just now by `method` alone: a second
   * factor adds `otp`/`mfa`, a switch carries its session's over.
   */
  auth?: SessionAuth;
}

/** The one answer to every failed sign-in, so none tells which part was wrong. */
export const invalidCredentials = () => new AppError("unauthorized", "Invalid credentials.");

/** The signed-in caller's user and session; 401 for a ctx without one. */
export function callerOf(ctx: Ctx): { userId: string; sessionId: string } {
  if (ctx.actor.type !== "user") throw new AppError("unauthorized");
  return { userId: ctx.actor.userId, sessionId: ctx.actor.sessionId };
}

/** The client address the security windows count against (`unknown` when the transport has none). */
export const clientIpOf = (ctx: Ctx): string => ctx.clientIp ?? "unknown";

function claimsOf(
  identity: Identity,
  sessionId: string,
  auth: SessionAuth,
  impersonatorId?: string | null,
): AccessClaims {
  return {
    ...(impersonatorId ? { impersonatorId } : {}),
    amr: auth.amr,
    authTime: Math.floor(auth.authTime.getTime() / 1000),
    userId: identity.userId,
    tenantId: identity.tenantId,
    sessionId,
    roles: identity.roles,
    platformRoles: identity.platformRoles,
    passwordChangeRequired: identity.mustChangePassword,
  };
}

export async function issueRefreshToken(db: Executor, sessionId: string, expiresAt: Date): Promise<string> {
  const refreshToken = opaqueToken();
  await db.insert(refreshTokens).values({ sessionId, tokenHash: tokenHash(refreshToken), expiresAt });
  return refreshToken;
}

export async function tokenPairFor(
  deps: AuthDeps,
  identity: Identity,
  sessionId: string,
  refreshToken: string,
  options: { impersonatorId?: string | null; auth: SessionAuth },
): Promise<TokenPair> {
  return {
    accessToken: await deps.tokens.issueAccessToken(
      claimsOf(identity, sessionId, options.auth, options.impersonatorId),
    ),
    tokenType: "Bearer",
    expiresIn: deps.tokens.accessTokenSeconds,
    refreshToken,
    passwordChangeRequired: identity.mustChangePassword,
  };
}

/**
 * Inserts a session only while the user row is still as the sign-in saw it: Active and, for a
 * password sign-in, with the hash that was verified; in a tenant, with its membership still Active. `FOR SHARE` waits for a concurrent password
 * change or disable (which update the row first, then revoke sessions, in one transaction) and
 * then sees the changed row: such a sign-in gets the same 401 as a wrong password instead of a
 * session opened after the others were revoked.
 */
export async function insertSessionIfUnchanged(
  tx: Executor,
  signIn: SignIn,
  // `createdAt` from the caller's clock: it is also the session's auth_time, which step-up judges by it
  values: Omit<typeof sessions.$inferInsert, "userId" | "tenantId" | "amr" | "authTime" | "createdAt"> & {
    createdAt: Date;
  },
): Promise<string> {
  const { identity, seenPasswordHash } = signIn;
  const [user] = await tx
    .select({ id: users.id })
    .from(users)
    .where(
      and(
        eq(users.id, identity.userId),
        eq(users.status, "Active"),
        seenPasswordHash === undefined ? undefined : eq(users.passwordHash, seenPasswordHash),
      ),
    )
    .for("share");
  if (!user) throw invalidCredentials();
  if (identity.tenantId !== null) {
    // and the membership as it was seen: disabling a member updates this row first, then the sessions
    const [membership] = await tx
      .select({ userId: tenantMemberships.userId })
      .from(tenantMemberships)
      .where(
        and(
          eq(tenantMemberships.tenantId, identity.tenantId),
          eq(tenantMemberships.userId, identity.userId),
          eq(tenantMemberships.status, "Active"),
        ),
      )
      .for("share");
    if (!membership) throw invalidCredentials();
  }
  const [session] = await tx
    .insert(sessions)
    .values({
      userAgent: signIn.ctx.userAgent ?? null,
      clientIp: signIn.ctx.clientIp ?? null,
      ...values,
      ...authOf(signIn, values.createdAt),
      userId: identity.userId,
      tenantId: identity.tenantId,
    })
    .returning({ id: sessions.id });
  if (!session) throw new Error("session insert returned nothing");
  await recordAudit(tx, signedInCtx(signIn, session.id), signInEvent(signIn, session.id, values.kind));
  return session.id;
}

/** The ctx of a fresh sign-in: the user who just proved who they are, on the new session. */
const signedInCtx = (signIn: SignIn, sessionId: string): Ctx => ({
  ...signIn.ctx,
  tenantId: signIn.identity.tenantId,
  actor: {
    type: "user",
    userId: signIn.identity.userId,
    sessionId,
    roles: signIn.identity.roles,
    platformRoles: signIn.identity.platformRoles,
  },
});

const signInEvent = (signIn: SignIn, sessionId: string, kind: string | undefined) =>
  ({
    action: "auth.sign_in",
    target: { type: "session", id: sessionId },
    details: { method: signIn.method, kind },
  }) as const;

/**
 * Opens a token session for a verified sign-in and returns its first token pair. It lasts
 * `RefreshTokenDays`, or until `expiresAt` (a switch ends when the session it came from would).
 */
export async function startTokenSession(
  deps: AuthDeps,
  signIn: SignIn,
  options: { expiresAt?: Date } = {},
): Promise<TokenPair> {
  const now = deps.clock.now();
  const expiresAt =
    options.expiresAt ??
    new Date(now.getTime() + deps.config.settings.Security.Jwt.RefreshTokenDays * 86_400_000);
  const opened = await withTransactionOrPlatform(deps, signIn.ctx, async (tx) => {
    const sessionId = await insertSessionIfUnchanged(tx, signIn, {
      kind: "token",
      createdAt: now,
      lastUsedAt: now,
      expiresAt,
    });
    return { sessionId, refreshToken: await issueRefreshToken(tx, sessionId, expiresAt) };
  });
  return tokenPairFor(deps, signIn.identity, opened.sessionId, opened.refreshToken, {
    auth: authOf(signIn, now),
  });
}

/**
 * Rotates a refresh token: the old one is spent, a new one returned. A spent token presented
 * again means it was stolen (or replayed): the whole session is revoked. On a request that acts in
 * a tenant (`ctx.tenantId`: its host or tenant code), a session of another tenant is refused like
 * an unknown token, and left as it is.
 */
export async function refreshSession(
  deps: AuthDeps,
  ctx: Ctx,
  input: { refreshToken: string },
): Promise<TokenPair> {
  const now = deps.clock.now();
  // a platform lookup: the token's session names the tenant (checked against the request's below)
  const [row] = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({
        id: refreshTokens.id,
        sessionId: refreshTokens.sessionId,
        rotatedAt: refreshTokens.rotatedAt,
        expiresAt: refreshTokens.expiresAt,
        userId: sessions.userId,
        tenantId: sessions.tenantId,
        kind: sessions.kind,
        revokedAt: sessions.revokedAt,
        sessionExpiresAt: sessions.expiresAt,
        impersonatorId: sessions.impersonatorId,
        amr: sessions.amr,
        authTime: sessions.authTime,
        createdAt: sessions.createdAt,
      })
      .from(refreshTokens)
      .innerJoin(sessions, eq(sessions.id, refreshTokens.sessionId))
      .where(eq(refreshTokens.tokenHash, tokenHash(input.refreshToken)))
      .limit(1),
  );
  // only token sessions carry refresh tokens; one on a browser session is refused, never rotated,
  // and so is one of another tenant than the request acts in
  if (row?.kind !== "token" || (ctx.tenantId !== null && row.tenantId !== ctx.tenantId)) {
    throw new AppError("unauthorized", "Invalid refresh token.");
  }
  if (row.revokedAt || row.sessionExpiresAt <= now || row.expiresAt <= now) {
    throw new AppError("unauthorized", "Invalid refresh token.");
  }
  // the old token is spent and the new one issued in one transaction; a refusal found on the way
  // commits the spending, and the session is revoked after it (in its own transaction)
  type Rotation = { refused: string } | { identity: Identity; refreshToken: string };
  // in the session's tenant's context (staff's sessions, with no tenant, on the platform path)
  const sessionCtx = { ...ctx, tenantId: row.tenantId };
  const rotated = await withTenantOrPlatformTransaction(
    deps,
    ctx,
    row.tenantId,
    async (tx): Promise<Rotation> => {
      const spent = await tx
        .update(refreshTokens)
        .set({ rotatedAt: now })
        .where(and(eq(refreshTokens.id, row.id), isNull(refreshTokens.rotatedAt)))
        .returning({ id: refreshTokens.id });
      if (row.rotatedAt || spent.length === 0) return { refused: "refresh token reuse" };
      const identity = await loadIdentity(tx, row.userId, row.tenantId);
      if (identity?.status !== "Active") return { refused: "user not active" };
      await tx.update(sessions).set({ lastUsedAt: now }).where(eq(sessions.id, row.sessionId));
      return { identity, refreshToken: await issueRefreshToken(tx, row.sessionId, row.sessionExpiresAt) };
    },
  );
  if ("refused" in rotated) {
    await revokeSession(deps, sessionCtx, {
      sessionId: row.sessionId,
      reason: rotated.refused,
      now,
      action: "auth.session_revoked",
    });
    if (rotated.refused === "refresh token reuse")
      deps.logger.warn("refresh token reused: session revoked", {
        sessionId: row.sessionId,
        userId: row.userId,
      });
    throw new AppError("unauthorized", "Invalid refresh token.");
  }
  return tokenPairFor(deps, rotated.identity, row.sessionId, rotated.refreshToken, {
    impersonatorId: row.impersonatorId,
    auth: sessionAuthOf(row),
  });
}

/**
 * Revokes one session and records it (`auth.sign_out` when its user ends it, else
 * `auth.session_revoked`), in one transaction; a session already ended records nothing.
 */
async function revokeSession(
  deps: DatabaseDeps & Pick<AuthDeps, "sessionCache">,
  ctx: Ctx,
  input: { sessionId: string; reason: string; now: Date; action: "auth.sign_out" | "auth.session_revoked" },
): Promise<void> {
  const { sessionId } = input;
  await withTenantOrPlatformTransaction(deps, ctx, ctx.tenantId, async (tx, txCtx) => {
    const [revoked] = await tx
      .update(sessions)
      .set({ revokedAt: input.now, revokedReason: input.reason })
      .where(and(eq(sessions.id, sessionId), isNull(sessions.revokedAt)))
      .returning({ userId: sessions.userId, tenantId: sessions.tenantId });
    if (revoked)
      await recordAudit(
        tx,
        ctx.actor.type === "anonymous"
          ? { ...ctx, actor: sessionActor(revoked, sessionId, input.action) }
          : ctx,
        {
          action: input.action,
          target: { type: "session", id: sessionId },
          details: { reason: input.reason },
          tenantId: revoked.tenantId,
        },
      );
    await endSessions(deps, txCtx, { sessionId });
  });
}

/** Who ends a session a refresh token names: its user on logout; Plinth itself on token reuse. */
const sessionActor = (
  session: { userId: string },
  sessionId: string,
  action: "auth.sign_out" | "auth.session_revoked",
): Ctx["actor"] =>
  action === "auth.sign_out"
    ? { type: "user", userId: session.userId, sessionId, roles: [], platformRoles: [] }
    : { type: "system", name: "auth" };

/**
 * Evicts ended sessions from this process's cache at once and tells every other process. In the
 * ctx's transaction, the notice goes out when it commits (this process's listener then evicts
 * again, in case the old row was read back in the meantime).
 */
export async function endSessions(
  deps: DatabaseDeps & Pick<Deps, "sessionCache">,
  ctx: Ctx,
  change: SessionChange,
): Promise<void> {
  deps.sessionCache.evict(change);
  // a NOTIFY, no tenant row: in the caller's transaction (sent at its commit) whatever its scope
  await withDatabase(deps, ctx, (db) => announceSessionChange(db, change));
}

/**
 * Ends the session a refresh token belongs to. Unknown tokens are ignored (logout is idempotent), and
 * so is a session of another tenant than the request acts in (`ctx.tenantId`).
 */
export async function logout(deps: AuthDeps, ctx: Ctx, input: { refreshToken: string }): Promise<void> {
  // a platform lookup, as refreshSession's; the session is ended in its own tenant's context
  const [row] = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({ sessionId: refreshTokens.sessionId, tenantId: sessions.tenantId })
      .from(refreshTokens)
      .innerJoin(sessions, eq(sessions.id, refreshTokens.sessionId))
      .where(eq(refreshTokens.tokenHash, tokenHash(input.refreshToken)))
      .limit(1),
  );
  if (!row || (ctx.tenantId !== null && row.tenantId !== ctx.tenantId)) return;
  await revokeSession(
    deps,
    { ...ctx, tenantId: row.tenantId },
    {
      sessionId: row.sessionId,
      reason: "logout",
      now: deps.clock.now(),
      action: "auth.sign_out",
    },
  );
}

/** Ends the session the caller is signed in with (browser sign-out). */
export async function revokeCallerSession(deps: AuthDeps, ctx: Ctx): Promise<void> {
  await revokeSession(deps, ctx, {
    sessionId: callerOf(ctx).sessionId,
    reason: "logout",
    now: deps.clock.now(),
    action: "auth.sign_out",
  });
}
