import { and, eq, isNull } from "drizzle-orm";
import { recordAudit, recordAuditLimited } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import { withPlatformTransaction, withTenantOrPlatformDatabase } from "../db/operation.ts";
import { sessions, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { hashPassword, passwordProblem, verifyPassword } from "../security/passwords.ts";
import { assertAllowed } from "../security/windows.ts";
import { completeSignIn } from "./complete-sign-in.ts";
import type { AuthDeps } from "./deps.ts";
import type { MfaRequired } from "./mfa-step.ts";
import { opaqueToken } from "./opaque-tokens.ts";
import { sessionAuthOf } from "./session-auth.ts";
import {
  callerOf,
  clientIpOf,
  endSessions,
  invalidCredentials,
  issueRefreshToken,
  type SignIn,
  type TokenPair,
  tokenPairFor,
} from "./sessions.ts";
import { requireRecentSecondFactor } from "./step-up.ts";
import { devicesOf, revokeTrustedDevices } from "./trusted-devices.ts";
import { findSignInUser, loadIdentity, normaliseEmail } from "./user-identity.ts";

// A real argon2id hash of a random password: unknown accounts cost the same time as known ones.
let dummyHash: Promise<string> | undefined;
const getDummyHash = () => {
  dummyHash ??= hashPassword(opaqueToken());
  return dummyHash;
};

/**
 * The password windows around one attempt (src/security/windows.ts): the account from this address
 * (slowed, then refused), the account from every address (only slowed, at a much higher count) and
 * this address across accounts (failures only, so an office behind one address can sign in all day).
 * All are consumed up front in one atomic step (so parallel guesses cannot overshoot a limit); a
 * success clears the account's windows for this address and every address, and gives back the
 * IP's permit (reserve, then settle). A stranger hammering an account from one address gets that
 * address refused; the owner signing in from another address is not.
 */
export async function passwordAttempt<T>(
  deps: AuthDeps,
  subjects: { account: string; ip: string },
  attempt: () => Promise<T>,
): Promise<T> {
  const decision = await deps.windows.consume("password", subjects);
  assertAllowed(decision);
  const refundIp = async () => {
    if (decision.recordedAtMs !== undefined) {
      await deps.windows.refund("password", { ip: subjects.ip }, decision.recordedAtMs);
    }
  };
  let result: T;
  try {
    result = await attempt();
  } catch (error) {
    if (!(error instanceof AppError && error.code === "unauthorized")) {
      // not a wrong password (e.g. the database failed): the IP's permit goes back; the original
      // error is what the caller sees even if giving it back fails (the count then errs high)
      await refundIp().catch(() => undefined);
    }
    throw error;
  }
  await deps.windows.reset("password", subjects);
  await refundIp();
  return result;
}

/**
 * Checks an e-mail and password in `ctx.tenantId` (its own users and its members with a shared
 * identity), or among platform staff when it is null.
 * Every failure is the same 401, guarded by the password windows (`passwordAttempt`).
 */
export async function verifyCredentials(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; password: string },
): Promise<SignIn> {
  const email = normaliseEmail(input.email);
  const account = `${ctx.tenantId ?? "platform"}:${email}`;
  let userId: string | null = null;
  try {
    return await passwordAttempt(deps, { account, ip: clientIpOf(ctx) }, async () => {
      // platform staff (no tenant) are found on the named platform path
      const row = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
        findSignInUser(db, ctx.tenantId, eq(users.email, email)),
      );
      userId = row?.id ?? null;
      const ok = await verifyPassword(input.password, row?.passwordHash ?? (await getDummyHash()));
      if (!row?.passwordHash || !ok) throw invalidCredentials();
      const identity = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
        loadIdentity(db, row.id, ctx.tenantId),
      );
      if (identity?.status !== "Active") throw invalidCredentials();
      return { identity, seenPasswordHash: row.passwordHash, ctx, method: "password" as const };
    });
  } catch (error) {
    if (error instanceof AppError && error.code === "unauthorized")
      await recordSignInFailure(deps, ctx, { method: "password", email, userId });
    throw error;
  }
}

/** A refused credential, recorded at most `Audit:FailuresPerMinute` per tenant and address. */
export async function recordSignInFailure(
  deps: AuthDeps,
  ctx: Ctx,
  input: {
    method: "password" | "sms" | "passkey" | "email_code" | "mfa";
    email?: string;
    phone?: string;
    reason?: string;
    userId: string | null;
  },
): Promise<void> {
  await recordAuditLimited(deps, ctx, {
    action: "auth.sign_in",
    outcome: "failure",
    target: { type: "user", id: input.userId },
    details: { method: input.method, email: input.email, phone: input.phone, reason: input.reason },
  });
}

/** Signs in with e-mail and password: a token session and its first token pair. */
export async function signInWithPassword(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; password: string },
): Promise<TokenPair | MfaRequired> {
  return completeSignIn(deps, await verifyCredentials(deps, ctx, input));
}

/**
 * The caller's user and session once `currentPassword` is proved, counted in the password windows
 * of the session's account (`passwordAttempt`): what a change of the password or of the e-mail
 * address starts with. `tenantId` is the session's tenant, `homeTenantId` the user's own.
 */
export async function callerWithPassword(deps: AuthDeps, ctx: Ctx, currentPassword: string) {
  const caller = callerOf(ctx);
  const [user] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({
        passwordHash: users.passwordHash,
        tenantId: sessions.tenantId,
        homeTenantId: users.tenantId,
        pool: users.pool,
        email: users.email,
        name: users.name,
        sessionKind: sessions.kind,
        sessionExpiresAt: sessions.expiresAt,
        amr: sessions.amr,
        authTime: sessions.authTime,
        createdAt: sessions.createdAt,
      })
      .from(users)
      .innerJoin(sessions, and(eq(sessions.id, caller.sessionId), eq(sessions.userId, users.id)))
      .where(eq(users.id, caller.userId))
      .limit(1),
  );
  if (!user) throw new AppError("unauthorized");
  const account = `${user.tenantId ?? "platform"}:${user.email}`;
  const passwordHash = user.passwordHash;
  await passwordAttempt(deps, { account, ip: clientIpOf(ctx) }, async () => {
    if (!passwordHash || !(await verifyPassword(currentPassword, passwordHash))) {
      throw new AppError("unauthorized", "The current password is wrong.");
    }
  });
  return user;
}

/**
 * Changes the caller's password (current one required), clears must-change-password and ends every
 * session of the user, the caller's own included: a stolen access token or cookie stops working at
 * once. A token session gets a fresh session and token pair in the answer; a browser session gets
 * none (null): its cookie is ended too and the page signs in again with the new password.
 */
export async function changePassword(
  deps: AuthDeps,
  ctx: Ctx,
  input: { currentPassword: string; newPassword: string },
): Promise<TokenPair | null> {
  const caller = callerOf(ctx);
  await requireRecentSecondFactor(deps, ctx);
  const user = await callerWithPassword(deps, ctx, input.currentPassword);
  const passwordHash = user.passwordHash;
  const weakness = await passwordProblem(input.newPassword, { email: user.email, name: user.name });
  if (weakness) {
    throw new AppError("validation_failed", "The new password is not strong enough.", {
      fields: [{ path: "newPassword", message: weakness }],
    });
  }
  if (input.newPassword === input.currentPassword) {
    throw new AppError("validation_failed", "The new password must differ from the current one.", {
      fields: [{ path: "newPassword", message: "must differ from the current password" }],
    });
  }
  const now = deps.clock.now();
  const newHash = await hashPassword(input.newPassword);
  // the platform path: a password is the identity's, and a shared identity's sessions in every
  // tenant end with it, not only those of the tenant the change was made in
  const opened = await withPlatformTransaction(deps, ctx, async (tx) => {
    // The user row first, then the sessions, in one transaction: a concurrent sign-in that verified
    // the old hash waits on this row (insertSessionIfUnchanged) and then finds it changed. The update
    // is conditional on the hash just verified, so two concurrent changes cannot both win.
    const updated = await tx
      .update(users)
      .set({ passwordHash: newHash, mustChangePassword: false, passwordChangedAt: now, updatedAt: now })
      .where(and(eq(users.id, caller.userId), eq(users.passwordHash, passwordHash ?? "")))
      .returning({ id: users.id });
    if (updated.length === 0) return null;
    await recordAudit(
      tx,
      { ...ctx, tenantId: user.tenantId },
      { action: "auth.password_changed", target: { type: "user", id: caller.userId } },
    );
    await revokeTrustedDevices(tx, { ...ctx, tenantId: user.tenantId }, now, {
      where: devicesOf(caller.userId, user.tenantId),
      reason: "password changed",
    });
    // every session, the caller's included (its refresh tokens die with it)
    await tx
      .update(sessions)
      .set({ revokedAt: now, revokedReason: "password changed" })
      .where(and(eq(sessions.userId, caller.userId), isNull(sessions.revokedAt)));
    if (user.sessionKind !== "token") return { sessionId: null, refreshToken: null };
    // the fresh session keeps how the user authenticated (a second factor stays proved)
    const auth = sessionAuthOf(user);
    const [session] = await tx
      .insert(sessions)
      .values({
        userId: caller.userId,
        tenantId: user.tenantId,
        kind: "token",
        createdAt: now,
        lastUsedAt: now,
        expiresAt: user.sessionExpiresAt,
        userAgent: ctx.userAgent ?? null,
        clientIp: ctx.clientIp ?? null,
        ...auth,
      })
      .returning({ id: sessions.id });
    if (!session) throw new Error("session insert returned nothing");
    return {
      sessionId: session.id,
      refreshToken: await issueRefreshToken(tx, session.id, user.sessionExpiresAt),
      auth,
    };
  });
  if (!opened) throw new AppError("unauthorized", "The current password is wrong.");
  await endSessions(deps, ctx, { userId: caller.userId });
  if (!opened.sessionId || !opened.refreshToken || !("auth" in opened)) return null;
  const identity = await withTenantOrPlatformDatabase(deps, ctx, user.tenantId, (db) =>
    loadIdentity(db, caller.userId, user.tenantId),
  );
  if (!identity) throw new AppError("unauthorized");
  return tokenPairFor(deps, identity, opened.sessionId, opened.refreshToken, { auth: opened.auth });
}
