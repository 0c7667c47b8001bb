import { and, eq, isNull, ne } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import { refreshTokens, sessions, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { hashPassword, passwordProblem, verifyPassword } from "../security/passwords.ts";
import { assertAllowed } from "../security/windows.ts";
import type { AuthDeps } from "./deps.ts";
import { loadIdentity, normaliseEmail, sameTenant } from "./identity.ts";
import { opaqueToken } from "./secrets.ts";
import {
  callerOf,
  clientIpOf,
  endSessions,
  invalidCredentials,
  issueRefreshToken,
  type SignIn,
  startTokenSession,
  type TokenPair,
  tokenPairFor,
} from "./sessions.ts";

// A real argon2id hash of a random password: unknown accounts cost the same time as known ones.
let dummyHash: Promise<string> | undefined;
const getDummyHash = () => {
  dummyHash ??= hashPassword(opaqueToken());
  return dummyHash;
};

/**
 * The password windows around one attempt: the account's window counts every attempt and is
 * cleared by a success; the client IP's window counts failures only, so an office behind one
 * address can sign in all day while guessing from it is still capped. Both are consumed up front in
 * one atomic step (so parallel guesses cannot overshoot either limit), and the IP's permit is
 * given back when the attempt turns out not to be a failed guess (reserve, then settle).
 */
async function passwordAttempt<T>(
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
  await deps.windows.reset("password", { account: subjects.account });
  await refundIp();
  return result;
}

/**
 * Checks an e-mail and password in `ctx.tenantId` (or among platform staff when it is null).
 * Every failure is the same 401, guarded by the password windows (`passwordAttempt`).
 */
export async function verifyCredentials(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; password: string },
): Promise<SignIn> {
  const email = normaliseEmail(input.email);
  const account = `${ctx.tenantId ?? "platform"}:${email}`;
  return passwordAttempt(deps, { account, ip: clientIpOf(ctx) }, async () => {
    const [row] = await deps.database.db
      .select({ id: users.id, passwordHash: users.passwordHash })
      .from(users)
      .where(and(sameTenant(users.tenantId, ctx.tenantId), eq(users.email, email)))
      .limit(1);
    const ok = await verifyPassword(input.password, row?.passwordHash ?? (await getDummyHash()));
    if (!row?.passwordHash || !ok) throw invalidCredentials();
    const identity = await loadIdentity(deps.database.db, row.id);
    if (identity?.status !== "Active") throw invalidCredentials();
    return { identity, seenPasswordHash: row.passwordHash };
  });
}

/** Signs in with e-mail and password: a token session and its first token pair. */
export async function signInWithPassword(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; password: string },
): Promise<TokenPair> {
  return startTokenSession(deps, await verifyCredentials(deps, ctx, input));
}

/**
 * Changes the caller's password (current one required), clears must-change-password and ends the
 * user's other sessions. A token session gets fresh tokens for itself; a browser session gets none
 * (null: the cookie session simply continues, and no refresh token is ever handed to page script).
 */
export async function changePassword(
  deps: AuthDeps,
  ctx: Ctx,
  input: { currentPassword: string; newPassword: string },
): Promise<TokenPair | null> {
  const caller = callerOf(ctx);
  const db = deps.database.db;
  const [user] = await db
    .select({
      passwordHash: users.passwordHash,
      tenantId: users.tenantId,
      email: users.email,
      name: users.name,
    })
    .from(users)
    .where(eq(users.id, caller.userId))
    .limit(1);
  if (!user) throw new AppError("unauthorized");
  const account = `${user.tenantId ?? "platform"}:${user.email}`;
  const passwordHash = user.passwordHash;
  await passwordAttempt(deps, { account, ip: clientIpOf(ctx) }, async () => {
    if (!passwordHash || !(await verifyPassword(input.currentPassword, passwordHash))) {
      throw new AppError("unauthorized", "The current password is wrong.");
    }
  });
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
  const changed = await db.transaction(async (tx) => {
    // The user row first, then the sessions, in one transaction: a concurrent sign-in that verified
    // the old hash waits on this row (insertSessionIfUnchanged) and then finds it changed. The update
    // is conditional on the hash just verified, so two concurrent changes cannot both win.
    const updated = await tx
      .update(users)
      .set({ passwordHash: newHash, mustChangePassword: false, passwordChangedAt: now, updatedAt: now })
      .where(and(eq(users.id, caller.userId), eq(users.passwordHash, passwordHash ?? "")))
      .returning({ id: users.id });
    if (updated.length === 0) return false;
    await tx
      .update(sessions)
      .set({ revokedAt: now, revokedReason: "password changed" })
      .where(
        and(
          eq(sessions.userId, caller.userId),
          ne(sessions.id, caller.sessionId),
          isNull(sessions.revokedAt),
        ),
      );
    await tx
      .update(refreshTokens)
      .set({ rotatedAt: now })
      .where(and(eq(refreshTokens.sessionId, caller.sessionId), isNull(refreshTokens.rotatedAt)));
    return true;
  });
  if (!changed) throw new AppError("unauthorized", "The current password is wrong.");
  await endSessions(deps, { userId: caller.userId });
  const [session] = await db
    .select({ kind: sessions.kind, expiresAt: sessions.expiresAt })
    .from(sessions)
    .where(eq(sessions.id, caller.sessionId))
    .limit(1);
  if (!session) throw new AppError("unauthorized");
  if (session.kind !== "token") return null;
  const identity = await loadIdentity(db, caller.userId);
  if (!identity) throw new AppError("unauthorized");
  return tokenPairFor(
    deps,
    identity,
    caller.sessionId,
    await issueRefreshToken(db, caller.sessionId, session.expiresAt),
  );
}
