import { randomInt } from "node:crypto";
import { and, desc, eq, gt, isNull, ne, type SQL, sql } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import type { Db, Executor } from "../db/client.ts";
import { refreshTokens, sessions, smsCodes, tenants, users } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { hashPassword, passwordProblem, verifyPassword } from "../security/passwords.ts";
import { assertAllowed } from "../security/windows.ts";
import { hmac, opaqueToken, safeEqual, tokenHash } from "./secrets.ts";
import { announceSessionChange, type SessionChange } from "./session-cache.ts";
import type { SmsSender } from "./sms.ts";
import type { AccessClaims, TokenService } from "./tokens.ts";

export interface AuthDeps
  extends Pick<
    Deps,
    "database" | "clock" | "config" | "windows" | "logger" | "dataProtection" | "sessionCache" | "pending"
  > {
  tokens: TokenService;
  sms: SmsSender;
  /** HMAC key for SMS codes (`Authentication:Sms:CodePepper`). */
  smsPepper: string;
}

export interface TokenPair {
  accessToken: string;
  tokenType: "Bearer";
  expiresIn: number;
  refreshToken: string;
  passwordChangeRequired: boolean;
}

export interface Identity {
  userId: string;
  tenantId: string | null;
  tenantCode: string | null;
  email: string;
  name: string;
  status: string;
  mustChangePassword: boolean;
  roles: string[];
  platformRoles: string[];
}

/** `column = tenantId`, or `column is null` for platform staff. */
function sameTenant(column: AnyPgColumn, tenantId: string | null): SQL {
  return tenantId ? eq(column, tenantId) : isNull(column);
}

const invalidCredentials = () => new AppError("unauthorized", "Invalid credentials.");

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** E.164: `+` and 7 to 15 digits. Spaces, dashes and brackets are dropped first. */
export function normalisePhone(phone: string): string | null {
  const compact = phone.replace(/[\s().-]/g, "");
  return /^\+[1-9]\d{6,14}$/.test(compact) ? compact : null;
}

/** The identity columns shared by loadIdentity and the per-request session lookup: one round trip. */
export const identityColumns = {
  userId: users.id,
  tenantId: users.tenantId,
  tenantCode: tenants.code,
  email: users.email,
  name: users.name,
  userStatus: users.status,
  tenantStatus: tenants.status,
  mustChangePassword: users.mustChangePassword,
  roles: sql<
    string[]
  >`coalesce((select array_agg(m.role order by m.role) from tenant_memberships m where m.user_id = ${users.id}), '{}')`,
  platformRoles: sql<
    string[]
  >`coalesce((select array_agg(b.role order by b.role) from platform_role_bindings b where b.user_id = ${users.id}), '{}')`,
};

type IdentityRow = {
  userId: string;
  tenantId: string | null;
  tenantCode: string | null;
  email: string;
  name: string;
  userStatus: string;
  tenantStatus: string | null;
  mustChangePassword: boolean;
  roles: string[];
  platformRoles: string[];
};

export function identityOf(row: IdentityRow): Identity {
  const status = row.tenantId && row.tenantStatus !== "Active" ? "TenantSuspended" : row.userStatus;
  return {
    userId: row.userId,
    tenantId: row.tenantId,
    tenantCode: row.tenantCode,
    email: row.email,
    name: row.name,
    status,
    mustChangePassword: row.mustChangePassword,
    roles: row.roles ?? [],
    platformRoles: row.platformRoles ?? [],
  };
}

export async function loadIdentity(db: Db, userId: string): Promise<Identity | null> {
  const [row] = await db
    .select(identityColumns)
    .from(users)
    .leftJoin(tenants, eq(tenants.id, users.tenantId))
    .where(eq(users.id, userId))
    .limit(1);
  return row ? identityOf(row) : null;
}

function claimsOf(identity: Identity, sessionId: string): AccessClaims {
  return {
    userId: identity.userId,
    tenantId: identity.tenantId,
    sessionId,
    roles: identity.roles,
    platformRoles: identity.platformRoles,
    passwordChangeRequired: identity.mustChangePassword,
  };
}

async function issueRefreshToken(db: Executor, sessionId: string, expiresAt: Date): Promise<string> {
  const refreshToken = opaqueToken();
  await db.insert(refreshTokens).values({ sessionId, tokenHash: tokenHash(refreshToken), expiresAt });
  return refreshToken;
}

async function tokenPair(
  deps: AuthDeps,
  identity: Identity,
  sessionId: string,
  refreshToken: string,
): Promise<TokenPair> {
  return {
    accessToken: await deps.tokens.issueAccessToken(claimsOf(identity, sessionId)),
    tokenType: "Bearer",
    expiresIn: deps.tokens.accessTokenSeconds,
    refreshToken,
    passwordChangeRequired: identity.mustChangePassword,
  };
}

/**
 * A verified sign-in: the identity, and what was seen of the user row when the credential was
 * checked (the password hash that matched; absent for an SMS code, which proves the phone).
 */
export interface SignIn {
  identity: Identity;
  seenPasswordHash?: string;
}

/**
 * Inserts a session only while the user row is still as the sign-in saw it: Active and, for a
 * password sign-in, with the hash that was verified. `FOR SHARE` waits for a concurrent password
 * change or disable (which update the row first, then revoke sessions, in one transaction) and
 * then sees the changed row: such a sign-in gets the same 401 as a wrong password instead of a
 * session opened after the others were revoked.
 */
export async function insertSessionIfUnchanged(
  tx: Executor,
  signIn: SignIn,
  values: Omit<typeof sessions.$inferInsert, "userId" | "tenantId">,
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
  const [session] = await tx
    .insert(sessions)
    .values({ ...values, userId: identity.userId, tenantId: identity.tenantId })
    .returning({ id: sessions.id });
  if (!session) throw new Error("session insert returned nothing");
  return session.id;
}

/** Opens a token session for a verified sign-in and returns its first token pair. */
export async function startTokenSession(deps: AuthDeps, signIn: SignIn): Promise<TokenPair> {
  const now = deps.clock.now();
  const expiresAt = new Date(now.getTime() + deps.config.settings.Security.Jwt.RefreshTokenDays * 86_400_000);
  const opened = await deps.database.db.transaction(async (tx) => {
    const sessionId = await insertSessionIfUnchanged(tx, signIn, {
      kind: "token",
      createdAt: now,
      lastUsedAt: now,
      expiresAt,
    });
    return { sessionId, refreshToken: await issueRefreshToken(tx, sessionId, expiresAt) };
  });
  return tokenPair(deps, signIn.identity, opened.sessionId, opened.refreshToken);
}

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
 * Checks an e-mail and password in a tenant (or among platform staff when `tenantId` is null).
 * Every failure is the same 401, guarded by the password windows (`passwordAttempt`).
 */
export async function verifyCredentials(
  deps: AuthDeps,
  input: { email: string; password: string; tenantId: string | null; ip: string },
): Promise<SignIn> {
  const email = normaliseEmail(input.email);
  const account = `${input.tenantId ?? "platform"}:${email}`;
  return passwordAttempt(deps, { account, ip: input.ip }, async () => {
    const [row] = await deps.database.db
      .select({ id: users.id, passwordHash: users.passwordHash })
      .from(users)
      .where(and(sameTenant(users.tenantId, input.tenantId), eq(users.email, email)))
      .limit(1);
    const ok = await verifyPassword(input.password, row?.passwordHash ?? (await getDummyHash()));
    if (!row?.passwordHash || !ok) throw invalidCredentials();
    const identity = await loadIdentity(deps.database.db, row.id);
    if (identity?.status !== "Active") throw invalidCredentials();
    return { identity, seenPasswordHash: row.passwordHash };
  });
}

export async function login(
  deps: AuthDeps,
  input: { email: string; password: string; tenantId: string | null; ip: string },
): Promise<TokenPair> {
  return startTokenSession(deps, await verifyCredentials(deps, input));
}

/**
 * Rotates a refresh token: the old one is spent, a new one returned. A spent token presented
 * again means it was stolen (or replayed): the whole session is revoked. On a request that acts in
 * a tenant (its host or tenant code), a session of another tenant is refused like an unknown
 * token, and left as it is.
 */
export async function refresh(
  deps: AuthDeps,
  refreshToken: string,
  requestTenantId?: string,
): Promise<TokenPair> {
  const db = deps.database.db;
  const now = deps.clock.now();
  const [row] = await db
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
    })
    .from(refreshTokens)
    .innerJoin(sessions, eq(sessions.id, refreshTokens.sessionId))
    .where(eq(refreshTokens.tokenHash, tokenHash(refreshToken)))
    .limit(1);
  // only token sessions carry refresh tokens; one on a browser session is refused, never rotated,
  // and so is one of another tenant than the request acts in
  if (row?.kind !== "token" || (requestTenantId !== undefined && row.tenantId !== requestTenantId)) {
    throw new AppError("unauthorized", "Invalid refresh token.");
  }
  if (row.revokedAt || row.sessionExpiresAt <= now || row.expiresAt <= now) {
    throw new AppError("unauthorized", "Invalid refresh token.");
  }
  const spent = await db
    .update(refreshTokens)
    .set({ rotatedAt: now })
    .where(and(eq(refreshTokens.id, row.id), isNull(refreshTokens.rotatedAt)))
    .returning({ id: refreshTokens.id });
  if (row.rotatedAt || spent.length === 0) {
    await revokeSession(deps, row.sessionId, "refresh token reuse", now);
    deps.logger.warn("refresh token reused: session revoked", {
      sessionId: row.sessionId,
      userId: row.userId,
    });
    throw new AppError("unauthorized", "Invalid refresh token.");
  }
  const identity = await loadIdentity(db, row.userId);
  if (identity?.status !== "Active") {
    await revokeSession(deps, row.sessionId, "user not active", now);
    throw new AppError("unauthorized", "Invalid refresh token.");
  }
  await db.update(sessions).set({ lastUsedAt: now }).where(eq(sessions.id, row.sessionId));
  return tokenPair(
    deps,
    identity,
    row.sessionId,
    await issueRefreshToken(db, row.sessionId, row.sessionExpiresAt),
  );
}

export async function revokeSession(
  deps: Pick<AuthDeps, "database" | "sessionCache">,
  sessionId: string,
  reason: string,
  now: Date,
): Promise<void> {
  await deps.database.db
    .update(sessions)
    .set({ revokedAt: now, revokedReason: reason })
    .where(and(eq(sessions.id, sessionId), isNull(sessions.revokedAt)));
  await endSessions(deps, { sessionId });
}

/** Evicts ended sessions from this process's cache at once and tells every other process. */
export async function endSessions(
  deps: Pick<AuthDeps, "database" | "sessionCache">,
  change: SessionChange,
): Promise<void> {
  deps.sessionCache.evict(change);
  await announceSessionChange(deps.database.db, change);
}

/**
 * Ends the session a refresh token belongs to. Unknown tokens are ignored (logout is idempotent), and
 * so is a session of another tenant than the request acts in.
 */
export async function logout(deps: AuthDeps, refreshToken: string, requestTenantId?: string): Promise<void> {
  const [row] = await deps.database.db
    .select({ sessionId: refreshTokens.sessionId, tenantId: sessions.tenantId })
    .from(refreshTokens)
    .innerJoin(sessions, eq(sessions.id, refreshTokens.sessionId))
    .where(eq(refreshTokens.tokenHash, tokenHash(refreshToken)))
    .limit(1);
  if (!row || (requestTenantId !== undefined && row.tenantId !== requestTenantId)) return;
  await revokeSession(deps, row.sessionId, "logout", deps.clock.now());
}

/**
 * Changes the password (current one required), clears must-change-password and ends the user's
 * other sessions. A token session gets fresh tokens for itself; a browser session gets none (null:
 * the cookie session simply continues, and no refresh token is ever handed to page script).
 */
export async function changePassword(
  deps: AuthDeps,
  principal: { userId: string; sessionId: string },
  input: { currentPassword: string; newPassword: string; ip: string },
): Promise<TokenPair | null> {
  const db = deps.database.db;
  const [user] = await db
    .select({
      passwordHash: users.passwordHash,
      tenantId: users.tenantId,
      email: users.email,
      name: users.name,
    })
    .from(users)
    .where(eq(users.id, principal.userId))
    .limit(1);
  if (!user) throw new AppError("unauthorized");
  const account = `${user.tenantId ?? "platform"}:${user.email}`;
  const passwordHash = user.passwordHash;
  await passwordAttempt(deps, { account, ip: input.ip }, async () => {
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
      .where(and(eq(users.id, principal.userId), eq(users.passwordHash, passwordHash ?? "")))
      .returning({ id: users.id });
    if (updated.length === 0) return false;
    await tx
      .update(sessions)
      .set({ revokedAt: now, revokedReason: "password changed" })
      .where(
        and(
          eq(sessions.userId, principal.userId),
          ne(sessions.id, principal.sessionId),
          isNull(sessions.revokedAt),
        ),
      );
    await tx
      .update(refreshTokens)
      .set({ rotatedAt: now })
      .where(and(eq(refreshTokens.sessionId, principal.sessionId), isNull(refreshTokens.rotatedAt)));
    return true;
  });
  if (!changed) throw new AppError("unauthorized", "The current password is wrong.");
  await endSessions(deps, { userId: principal.userId });
  const [session] = await db
    .select({ kind: sessions.kind, expiresAt: sessions.expiresAt })
    .from(sessions)
    .where(eq(sessions.id, principal.sessionId))
    .limit(1);
  if (!session) throw new AppError("unauthorized");
  if (session.kind !== "token") return null;
  const identity = await loadIdentity(db, principal.userId);
  if (!identity) throw new AppError("unauthorized");
  const expiresAt = session.expiresAt;
  return tokenPair(
    deps,
    identity,
    principal.sessionId,
    await issueRefreshToken(db, principal.sessionId, expiresAt),
  );
}

function smsCodeHash(deps: AuthDeps, tenantId: string | null, phone: string, code: string): string {
  return hmac(deps.smsPepper, `${tenantId ?? "platform"}:${phone}:${code}`);
}

/**
 * Sends a six-digit sign-in code to an account's phone. The answer is the same whether or not an
 * account has that number, and so is its timing: only the phone's validity and the send window (per
 * phone and per IP) are decided before answering; the lookup, the code's storage and the provider
 * call run in the background (`deps.pending`), their failures logged for operators.
 */
export async function sendSmsCode(
  deps: AuthDeps,
  input: { phone: string; tenantId: string | null; ip: string },
): Promise<void> {
  const phone = normalisePhone(input.phone);
  if (!phone) {
    throw new AppError("validation_failed", "The phone number is not valid.", {
      fields: [{ path: "phone", message: "must be an E.164 number such as +14155550100" }],
    });
  }
  assertAllowed(
    await deps.windows.consume("smsSend", {
      phone: `${input.tenantId ?? "platform"}:${phone}`,
      ip: input.ip,
    }),
  );
  const now = deps.clock.now();
  deps.pending.run("SMS code send", () => deliverSmsCode(deps, { phone, tenantId: input.tenantId, now }));
}

/** The background half of `sendSmsCode`: nothing for an unknown number, else store and send a code. */
async function deliverSmsCode(
  deps: AuthDeps,
  input: { phone: string; tenantId: string | null; now: Date },
): Promise<void> {
  const { phone, now } = input;
  const db = deps.database.db;
  const [user] = await db
    .select({ id: users.id })
    .from(users)
    .where(
      and(sameTenant(users.tenantId, input.tenantId), eq(users.phone, phone), eq(users.status, "Active")),
    )
    .limit(1);
  if (!user) return;
  const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
  const lifetime = deps.config.settings.Authentication.Sms.CodeLifetimeSeconds;
  await db.transaction(async (tx) => {
    // a new code replaces any earlier one still open
    await tx
      .update(smsCodes)
      .set({ consumedAt: now })
      .where(
        and(
          sameTenant(smsCodes.tenantId, input.tenantId),
          eq(smsCodes.phone, phone),
          isNull(smsCodes.consumedAt),
        ),
      );
    await tx.insert(smsCodes).values({
      tenantId: input.tenantId,
      phone,
      codeHash: smsCodeHash(deps, input.tenantId, phone, code),
      createdAt: now,
      expiresAt: new Date(now.getTime() + lifetime * 1000),
    });
  });
  try {
    await deps.sms.send({
      tenantId: input.tenantId,
      to: phone,
      text: `Your sign-in code is ${code}. It expires in ${Math.round(lifetime / 60)} minutes.`,
    });
  } catch (error) {
    // the caller already has the uniform answer; the failure is for operators. The error is
    // described by the logger (redacted; a failed query's parameters never show), never the code.
    deps.logger.error("SMS delivery failed", { error });
  }
}

/** Verifies a code: single use, short-lived, compared in constant time; a match signs the user in. */
export async function verifySmsCode(
  deps: AuthDeps,
  input: { phone: string; code: string; tenantId: string | null; ip: string },
): Promise<TokenPair> {
  const phone = normalisePhone(input.phone);
  if (!phone || !/^\d{6}$/.test(input.code)) throw invalidCredentials();
  const subject = `${input.tenantId ?? "platform"}:${phone}`;
  assertAllowed(await deps.windows.consume("smsVerify", { phone: subject, ip: input.ip }));
  const db = deps.database.db;
  const now = deps.clock.now();
  const [open] = await db
    .select({ id: smsCodes.id, codeHash: smsCodes.codeHash, attempts: smsCodes.attempts })
    .from(smsCodes)
    .where(
      and(
        sameTenant(smsCodes.tenantId, input.tenantId),
        eq(smsCodes.phone, phone),
        isNull(smsCodes.consumedAt),
        gt(smsCodes.expiresAt, now),
      ),
    )
    .orderBy(desc(smsCodes.createdAt))
    .limit(1);
  if (!open) throw invalidCredentials();
  if (!safeEqual(open.codeHash, smsCodeHash(deps, input.tenantId, phone, input.code))) {
    const limit = deps.config.settings.Authentication.Sms.VerifyLimit;
    await db
      .update(smsCodes)
      .set({
        attempts: sql`${smsCodes.attempts} + 1`,
        // too many wrong guesses burn the code
        consumedAt: sql`case when ${smsCodes.attempts} + 1 >= ${limit} then ${now.toISOString()}::timestamptz else null end`,
      })
      .where(eq(smsCodes.id, open.id));
    throw invalidCredentials();
  }
  const used = await db
    .update(smsCodes)
    .set({ consumedAt: now })
    .where(and(eq(smsCodes.id, open.id), isNull(smsCodes.consumedAt)))
    .returning({ id: smsCodes.id });
  if (used.length === 0) throw invalidCredentials();
  const [user] = await db
    .select({ id: users.id })
    .from(users)
    .where(and(sameTenant(users.tenantId, input.tenantId), eq(users.phone, phone)))
    .limit(1);
  const identity = user ? await loadIdentity(db, user.id) : null;
  if (identity?.status !== "Active") throw invalidCredentials();
  await deps.windows.reset("smsVerify", { phone: subject });
  return startTokenSession(deps, { identity });
}
