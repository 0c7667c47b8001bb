import { and, eq, isNull, ne, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { withTransactionOrPlatform } from "../db/operation.ts";
import { users } from "../db/schema/index.ts";
import { enqueueEmail } from "../email/enqueue-email.ts";
import { EMAIL_LINK_PATHS, emailLink } from "../email/links.ts";
import { AppError } from "../errors.ts";
import type { AuthDeps } from "./deps.ts";
import { callerWithPassword } from "./password-sign-in.ts";
import { callerOf, endSessions } from "./sessions.ts";
import { consumeSingleUseToken, issueSingleUseToken } from "./single-use-tokens.ts";
import { normaliseEmail } from "./user-identity.ts";

/** One mailbox, as invitations and sign-up accept it. */
const ADDRESS = /^[^\s@<>()",;:\\]+@[^\s@<>()",;:\\]+\.[^\s@<>()",;:\\]+$/;

/** `a***@example.com`: enough for the owner to recognise, not the whole address. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf("@");
  if (at < 1) return "***";
  return `${email.slice(0, 1)}***${email.slice(at)}`;
}

/**
 * `POST /api/auth/email/change`: the signed-in user asks to change their address, with their current
 * password (counted in the password windows like a sign-in). Nothing changes yet: in one
 * transaction a link (a single-use token, purpose `email_change`, the new address as its subject,
 * `Authentication:EmailVerification:TokenLifetimeMinutes`) is mailed to the new address, and a
 * notice to the current one naming the new address masked. A new address that another sign-in of
 * the same pool already has gets no link (the notice still goes): the answer (202) is the same, so
 * the caller learns nothing about other accounts. A newer request spends the older link.
 */
export async function requestEmailChange(
  deps: AuthDeps,
  ctx: Ctx,
  input: { newEmail: string; currentPassword: string },
): Promise<void> {
  const caller = callerOf(ctx);
  const newEmail = normaliseEmail(input.newEmail);
  if (!ADDRESS.test(newEmail) || newEmail.length > 320)
    throw new AppError("validation_failed", "The new address is not valid.", {
      fields: [{ path: "newEmail", message: "must be one e-mail address" }],
    });
  const user = await callerWithPassword(deps, ctx, input.currentPassword);
  if (newEmail === user.email)
    throw new AppError("validation_failed", "The new address is the current one.", {
      fields: [{ path: "newEmail", message: "must differ from the current address" }],
    });
  const settings = deps.config.settings;
  const lifetimeMinutes = settings.Authentication.EmailVerification.TokenLifetimeMinutes;
  const tenantId = user.tenantId;
  await withTransactionOrPlatform(deps, ctx, async (tx, txCtx) => {
    const taken = await addressTaken(tx, { ...user, email: newEmail, userId: caller.userId });
    if (!taken) {
      const issued = await issueSingleUseToken(deps, txCtx, {
        purpose: "email_change",
        tenantId,
        userId: caller.userId,
        subject: newEmail,
        lifetimeSeconds: lifetimeMinutes * 60,
        replacePrevious: true,
      });
      await enqueueEmail(deps, txCtx, {
        tenantId,
        to: newEmail,
        template: "email-change",
        data: {
          name: user.name || newEmail,
          link: emailLink(settings, EMAIL_LINK_PATHS.emailChange, issued.token),
          expiresInMinutes: lifetimeMinutes,
        },
      });
    }
    await enqueueEmail(deps, txCtx, {
      tenantId,
      to: user.email,
      template: "email-change-notice",
      data: { name: user.name || user.email, newEmail: maskEmail(newEmail) },
    });
    await recordAudit(
      tx,
      { ...txCtx, tenantId },
      { action: "user.email_change_requested", target: { type: "user", id: caller.userId } },
    );
  });
}

/** Whether another sign-in of the user's pool (and home tenant) has `email` (users_pool_email_unique). */
async function addressTaken(
  tx: Executor,
  user: { pool: string; homeTenantId: string | null; email: string; userId: string },
): Promise<boolean> {
  const [taken] = await tx
    .select({ id: users.id })
    .from(users)
    .where(
      and(
        sql`${users.pool} = ${user.pool}`,
        user.homeTenantId === null ? isNull(users.tenantId) : eq(users.tenantId, user.homeTenantId),
        eq(users.email, user.email),
        ne(users.id, user.userId),
      ),
    )
    .limit(1);
  return taken !== undefined;
}

/** A dead link: unknown, used, expired or of another tenant, as every mailed link answers it. */
const invalidLink = () => new AppError("not_found", "The link is invalid, expired or already used.");

/**
 * `POST /api/auth/email/change/confirm`: the link mailed to the new address proves it; only now the
 * user's address changes, verified. In one transaction: the token is spent, the address set (409
 * when another sign-in of the pool took it meanwhile, and the link is then spent too), the
 * change audited as `user.email_changed` (`from`, `to`).
 */
export async function confirmEmailChange(deps: AuthDeps, ctx: Ctx, input: { token: string }): Promise<void> {
  const now = deps.clock.now();
  await withTransactionOrPlatform(deps, ctx, async (tx, txCtx) => {
    const consumed = await consumeSingleUseToken(deps, txCtx, {
      purpose: "email_change",
      token: input.token,
      tenantId: ctx.tenantId === null ? undefined : ctx.tenantId,
    });
    if (!consumed?.userId || !consumed.subject) throw invalidLink();
    const [before] = await tx
      .select({ email: users.email, pool: users.pool, homeTenantId: users.tenantId })
      .from(users)
      .where(and(eq(users.id, consumed.userId), eq(users.status, "Active")))
      .for("update");
    if (!before) throw invalidLink();
    if (await addressTaken(tx, { ...before, email: consumed.subject, userId: consumed.userId }))
      throw new AppError("conflict", "Another account has this address now.");
    const changed = await tx
      .update(users)
      .set({ email: consumed.subject, emailVerifiedAt: now, updatedAt: now })
      .where(eq(users.id, consumed.userId))
      .returning({ id: users.id })
      .catch((error: unknown) => {
        if ((error as { code?: string }).code === "23505")
          throw new AppError("conflict", "Another account has this address now.");
        throw error;
      });
    if (changed.length === 0) throw invalidLink();
    // the sessions stay open; the identities every process cached carry the old address
    await endSessions(deps, txCtx, { userId: consumed.userId });
    await recordAudit(
      tx,
      { ...txCtx, tenantId: consumed.tenantId },
      {
        action: "user.email_changed",
        target: { type: "user", id: consumed.userId },
        details: { from: before.email, to: consumed.subject },
      },
    );
  });
}
