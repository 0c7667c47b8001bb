import { and, eq, isNull, type SQL } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import {
  withPlatformTransaction,
  withTenantOrPlatformDatabase,
  withTransactionOrPlatform,
} from "../db/operation.ts";
import { sessions, users } from "../db/schema/index.ts";
import { singleUseTokens } from "../db/schema/single-use-tokens.ts";
import { enqueueEmail } from "../email/enqueue-email.ts";
import { EMAIL_LINK_PATHS, emailLink } from "../email/links.ts";
import { AppError } from "../errors.ts";
import { hashPassword, passwordProblem } from "../security/passwords.ts";
import { assertAllowed } from "../security/windows.ts";
import type { AuthDeps } from "./deps.ts";
import { tokenHash } from "./opaque-tokens.ts";
import { clientIpOf, endSessions } from "./sessions.ts";
import { consumeSingleUseToken, issueSingleUseToken } from "./single-use-tokens.ts";
import { devicesOf, revokeTrustedDevices } from "./trusted-devices.ts";
import { findSignInUser, normaliseEmail } from "./user-identity.ts";

/**
 * The one answer to a token that is unknown, spent, expired or of another tenant: a 404, as an
 * invitation's dead link is (a well-formed token names a link that does not exist, or no longer).
 */
const invalidLink = () => new AppError("not_found", "The link is invalid, expired or already used.");

/**
 * `POST /api/auth/password/forgot`: answers (202) once the reset windows allow the attempt — per
 * address asked for and per client, consumed before anything is looked up — and does the rest in
 * the background (`deps.pending`): an Active user with that address in `ctx.tenantId` (or among
 * platform staff) gets a reset link by e-mail; an unknown address gets nothing. The answer, and
 * its timing, are the same either way.
 */
export async function requestPasswordReset(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string },
): Promise<void> {
  const email = normaliseEmail(input.email);
  const account = `${ctx.tenantId ?? "platform"}:${email}`;
  assertAllowed(await deps.windows.consume("passwordReset", { account, ip: clientIpOf(ctx) }));
  deps.pending.run("password reset request", () => sendResetLink(deps, ctx, email));
}

async function sendResetLink(deps: AuthDeps, ctx: Ctx, email: string): Promise<void> {
  const settings = deps.config.settings;
  const lifetimeMinutes = settings.Authentication.PasswordReset.TokenLifetimeMinutes;
  await withTransactionOrPlatform(deps, ctx, async (tx, txCtx) => {
    // whoever signs in to the request's tenant with this address (its own user or a member with a
    // shared identity; platform staff without a tenant): the link is bound to that tenant
    const found = await findSignInUser(
      tx,
      ctx.tenantId,
      and(eq(users.email, email), eq(users.status, "Active")) as SQL,
    );
    if (!found) return;
    const [named] = await tx.select({ name: users.name }).from(users).where(eq(users.id, found.id));
    const user = { id: found.id, name: named?.name ?? "", tenantId: ctx.tenantId };
    const issued = await issueSingleUseToken(deps, txCtx, {
      purpose: "password_reset",
      tenantId: user.tenantId,
      userId: user.id,
      subject: email,
      lifetimeSeconds: lifetimeMinutes * 60,
      replacePrevious: true,
    });
    await enqueueEmail(deps, txCtx, {
      tenantId: user.tenantId,
      to: email,
      template: "password-reset",
      data: {
        name: user.name || email,
        link: emailLink(settings, EMAIL_LINK_PATHS.passwordReset, issued.token),
        expiresInMinutes: lifetimeMinutes,
      },
    });
    await recordAudit(
      tx,
      { ...txCtx, tenantId: user.tenantId },
      { action: "auth.password_reset_requested", target: { type: "user", id: user.id } },
    );
  });
}

/**
 * `POST /api/auth/password/reset`: sets a new password with a reset link's token. The token is
 * looked up (by hash) to judge the new password against the account's own words, then consumed,
 * the password set, the address marked verified (the link proved it) and every session of the
 * user ended, in one transaction; every API process drops them at once (NOTIFY). A token that is
 * unknown, spent, expired, or of another tenant than the request acts in is 400.
 */
export async function resetPassword(
  deps: AuthDeps,
  ctx: Ctx,
  input: { token: string; newPassword: string },
): Promise<void> {
  const scope = ctx.tenantId === null ? undefined : ctx.tenantId;
  // a named platform lookup on the platform host (the token names its tenant), else in the
  // request tenant's context
  const [candidate] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({ email: users.email, name: users.name })
      .from(singleUseTokens)
      .innerJoin(users, eq(users.id, singleUseTokens.userId))
      .where(
        and(
          eq(singleUseTokens.tokenHash, tokenHash(input.token)),
          eq(singleUseTokens.purpose, "password_reset"),
        ),
      )
      .limit(1),
  );
  if (!candidate) throw invalidLink();
  const weakness = await passwordProblem(input.newPassword, { email: candidate.email, name: candidate.name });
  if (weakness)
    throw new AppError("validation_failed", "The new password is not strong enough.", {
      fields: [{ path: "newPassword", message: weakness }],
    });
  const newHash = await hashPassword(input.newPassword);
  const now = deps.clock.now();
  // the platform path: a password is the identity's, and a shared identity's sessions in every
  // tenant end with it (the token is checked against the request's tenant, `scope`)
  const userId = await withPlatformTransaction(deps, ctx, async (tx, txCtx) => {
    const consumed = await consumeSingleUseToken(deps, txCtx, {
      purpose: "password_reset",
      token: input.token,
      tenantId: scope,
    });
    if (!consumed?.userId) throw invalidLink();
    const [user] = await tx
      .update(users)
      .set({ passwordHash: newHash, mustChangePassword: false, passwordChangedAt: now, updatedAt: now })
      .where(and(eq(users.id, consumed.userId), eq(users.status, "Active")))
      .returning({ id: users.id, email: users.email });
    if (!user) throw invalidLink();
    // the tenant the link was sent for (a shared identity belongs to none)
    const tenantId = consumed.tenantId;
    if (user.email === consumed.subject)
      await tx
        .update(users)
        .set({ emailVerifiedAt: now })
        .where(and(eq(users.id, user.id), isNull(users.emailVerifiedAt)));
    await revokeTrustedDevices(tx, { ...txCtx, tenantId }, now, {
      where: devicesOf(user.id, tenantId),
      reason: "password reset",
    });
    await tx
      .update(sessions)
      .set({ revokedAt: now, revokedReason: "password reset" })
      .where(and(eq(sessions.userId, user.id), isNull(sessions.revokedAt)));
    await recordAudit(
      tx,
      { ...txCtx, tenantId },
      { action: "auth.password_reset", target: { type: "user", id: user.id } },
    );
    await endSessions(deps, txCtx, { userId: user.id });
    return user.id;
  });
  deps.logger.info("password reset: every session of the user ended", { userId });
}

/**
 * Sends the user a link that verifies their current address (on creation, on a change of
 * address, on request), in the ctx's transaction: it commits with the change that caused it.
 */
export async function sendEmailVerification(
  deps: AuthDeps,
  ctx: Ctx,
  /** `tenantId`: the tenant the link is for (a shared identity's; default: the user's own tenant). */
  input: { userId: string; tenantId?: string | null },
): Promise<void> {
  const settings = deps.config.settings;
  const lifetimeMinutes = settings.Authentication.EmailVerification.TokenLifetimeMinutes;
  await withTransactionOrPlatform(deps, ctx, async (tx, txCtx) => {
    const [user] = await tx
      .select({ id: users.id, name: users.name, email: users.email, tenantId: users.tenantId })
      .from(users)
      .where(eq(users.id, input.userId))
      .limit(1);
    if (!user) throw new AppError("not_found");
    const tenantId = input.tenantId === undefined ? user.tenantId : input.tenantId;
    const issued = await issueSingleUseToken(deps, txCtx, {
      purpose: "email_verification",
      tenantId,
      userId: user.id,
      subject: user.email,
      lifetimeSeconds: lifetimeMinutes * 60,
      replacePrevious: true,
    });
    await enqueueEmail(deps, txCtx, {
      tenantId,
      to: user.email,
      template: "email-verification",
      data: {
        name: user.name || user.email,
        link: emailLink(settings, EMAIL_LINK_PATHS.emailVerification, issued.token),
        expiresInMinutes: lifetimeMinutes,
      },
    });
  });
}

/**
 * `POST /api/auth/email/verify`: marks the address the token was sent to as verified — only while
 * it is still the user's address (a link sent before a change of address verifies nothing).
 */
export async function verifyEmail(deps: AuthDeps, ctx: Ctx, input: { token: string }): Promise<void> {
  const now = deps.clock.now();
  // on the platform host a named platform lookup (the token names its tenant), else in the request
  // tenant's context
  await withTransactionOrPlatform(deps, ctx, async (tx, txCtx) => {
    const consumed = await consumeSingleUseToken(deps, txCtx, {
      purpose: "email_verification",
      token: input.token,
      tenantId: ctx.tenantId === null ? undefined : ctx.tenantId,
    });
    if (!consumed?.userId || !consumed.subject) throw invalidLink();
    const [user] = await tx
      .update(users)
      .set({ emailVerifiedAt: now, updatedAt: now })
      .where(and(eq(users.id, consumed.userId), eq(users.email, consumed.subject)))
      .returning({ id: users.id });
    if (!user) throw invalidLink();
    await recordAudit(
      tx,
      { ...txCtx, tenantId: consumed.tenantId },
      { action: "auth.email_verified", target: { type: "user", id: user.id } },
    );
  });
}
