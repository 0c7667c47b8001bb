import { randomInt } from "node:crypto";
import { and, desc, eq, gt, isNull, type SQL, sql } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { withDatabase, withPlatformTransaction, withTransaction } from "../db/operation.ts";
import { emailSignInCodes, tenants, users } from "../db/schema/index.ts";
import { enqueueEmail } from "../email/enqueue-email.ts";
import { EMAIL_LINK_PATHS, emailLink } from "../email/links.ts";
import { AppError } from "../errors.ts";
import { assertAllowed } from "../security/windows.ts";
import { completeSignIn } from "./complete-sign-in.ts";
import type { AuthDeps } from "./deps.ts";
import type { MfaRequired } from "./mfa-step.ts";
import { hmac, opaqueToken, safeEqual, tokenHash } from "./opaque-tokens.ts";
import { recordSignInFailure } from "./password-sign-in.ts";
import { clientIpOf, invalidCredentials, type SignIn, type TokenPair } from "./sessions.ts";
import { findSignInUser, type Identity, loadIdentity, normaliseEmail } from "./user-identity.ts";

/**
 * Sign-in by e-mail (a tenant allows it with its `emailSignIn` setting): one message carries a
 * six-digit code and a link; either signs in once and spends both. Built like the SMS sign-in
 * (src/auth/sms-sign-in.ts): the start answers the same, as fast, for every address; a wrong code
 * costs the same work whether or not the address has an account or an open code.
 */

/** The code as stored: HMAC under the code pepper, bound to tenant and address (no offline guessing). */
function emailCodeHash(deps: AuthDeps, tenantId: string, email: string, code: string): string {
  return hmac(deps.smsPepper, `email:${tenantId}:${email}:${code}`);
}

/** Matches no tenant and no code row: the same statements run when there is nothing to find. */
const NIL_ID = "00000000-0000-0000-0000-000000000000";
/** Compared against when no code is open: never equal to an HMAC (base64url has no `!`). */
const NO_CODE_HASH = "!".repeat(43);

const accountOf = (ctx: Ctx, email: string) => `${ctx.tenantId ?? "platform"}:${email}`;

/**
 * `POST /api/auth/email/code`: answers (202) once the send windows — the address in its tenant
 * and the client address — allow it, before anything is looked up; the rest runs in the background
 * (`deps.pending`): when the tenant allows e-mail sign-in and an Active member has the address, a
 * code and a link are stored (hashed) and mailed through the outbox; otherwise nothing happens. The
 * answer and its timing are the same for every address, every tenant code and every setting.
 */
export async function sendEmailSignIn(deps: AuthDeps, ctx: Ctx, input: { email: string }): Promise<void> {
  const email = normaliseEmail(input.email);
  assertAllowed(
    await deps.windows.consume("emailCodeSend", { account: accountOf(ctx, email), ip: clientIpOf(ctx) }),
  );
  deps.pending.run("e-mail sign-in code send", () => mailSignInCode(deps, ctx, email));
}

/** The background half of `sendEmailSignIn`. */
async function mailSignInCode(deps: AuthDeps, ctx: Ctx, email: string): Promise<void> {
  const { tenantId } = ctx;
  // platform staff sign in with a password only
  if (tenantId === null) return;
  const settings = deps.config.settings;
  const lifetime = settings.Authentication.EmailSignIn.CodeLifetimeSeconds;
  const now = deps.clock.now();
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    const [tenant] = await tx
      .select({ emailSignIn: tenants.emailSignIn })
      .from(tenants)
      .where(and(eq(tenants.id, tenantId), eq(tenants.status, "Active")));
    if (!tenant?.emailSignIn) return;
    const found = await findSignInUser(
      tx,
      tenantId,
      and(eq(users.email, email), eq(users.status, "Active")) as SQL,
    );
    if (!found) return;
    const identity = await loadIdentity(tx, found.id, tenantId);
    if (identity?.status !== "Active") return;
    // a new message replaces any earlier code and link still open
    await tx
      .update(emailSignInCodes)
      .set({ consumedAt: now })
      .where(
        and(
          eq(emailSignInCodes.tenantId, tenantId),
          eq(emailSignInCodes.email, email),
          isNull(emailSignInCodes.consumedAt),
        ),
      );
    const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
    const link = opaqueToken(32);
    await tx.insert(emailSignInCodes).values({
      tenantId,
      userId: found.id,
      email,
      codeHash: emailCodeHash(deps, tenantId, email, code),
      linkHash: tokenHash(link),
      createdAt: now,
      expiresAt: new Date(now.getTime() + lifetime * 1000),
    });
    await enqueueEmail(deps, txCtx, {
      tenantId,
      to: email,
      template: "sign-in-link",
      data: {
        name: identity.name || email,
        code,
        link: emailLink(settings, EMAIL_LINK_PATHS.signInLink, link),
        expiresInMinutes: Math.max(1, Math.round(lifetime / 60)),
      },
    });
  });
}

/**
 * `POST /api/auth/email/code/verify`: signs in with the code of the message. A wrong code costs the
 * same window write, select, HMAC, comparison and update (of no row when there is no open code)
 * whatever the address; `VerifyLimit` wrong guesses burn the code. Every failure is the same 401.
 */
export async function verifyEmailCode(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; code: string },
): Promise<TokenPair | MfaRequired> {
  return completeSignIn(deps, await checkEmailCode(deps, ctx, input));
}

/**
 * The code's check alone (the verification of `verifyEmailCode`): the sign-in it proves, for a
 * token pair (`completeSignIn`) or a browser session (`completeBrowserEmailSignIn`).
 */
export async function checkEmailCode(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; code: string },
): Promise<SignIn> {
  try {
    return await signInWithEmailCode(deps, ctx, input);
  } catch (error) {
    if (error instanceof AppError && error.code === "unauthorized")
      await recordSignInFailure(deps, ctx, {
        method: "email_code",
        email: normaliseEmail(input.email),
        userId: null,
      });
    throw error;
  }
}

async function signInWithEmailCode(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; code: string },
): Promise<SignIn> {
  const email = normaliseEmail(input.email);
  if (!/^\d{6}$/.test(input.code)) throw invalidCredentials();
  const account = accountOf(ctx, email);
  assertAllowed(await deps.windows.consume("emailCodeVerify", { account, ip: clientIpOf(ctx) }));
  const tenantId = ctx.tenantId ?? NIL_ID;
  const now = deps.clock.now();
  const [open] = await withDatabase(deps, ctx, (db) =>
    db
      .select({ id: emailSignInCodes.id, codeHash: emailSignInCodes.codeHash })
      .from(emailSignInCodes)
      .where(
        and(
          eq(emailSignInCodes.tenantId, tenantId),
          eq(emailSignInCodes.email, email),
          isNull(emailSignInCodes.consumedAt),
          gt(emailSignInCodes.expiresAt, now),
        ),
      )
      .orderBy(desc(emailSignInCodes.createdAt))
      .limit(1),
  );
  const matches = safeEqual(open?.codeHash ?? NO_CODE_HASH, emailCodeHash(deps, tenantId, email, input.code));
  if (!open || !matches) {
    const limit = deps.config.settings.Authentication.EmailSignIn.VerifyLimit;
    // as for SMS codes: the commit does not wait for the WAL flush, which only an updated row
    // would make it do (1-3 ms that would tell which addresses hold an open code)
    await withTransaction(deps, ctx, async (tx) => {
      await tx.execute(sql`set local synchronous_commit = off`);
      await tx
        .update(emailSignInCodes)
        .set({
          attempts: sql`${emailSignInCodes.attempts} + 1`,
          consumedAt: sql`case when ${emailSignInCodes.attempts} + 1 >= ${limit} then ${now.toISOString()}::timestamptz else null end`,
        })
        .where(eq(emailSignInCodes.id, open?.id ?? NIL_ID));
    });
    throw invalidCredentials();
  }
  const identity = await withTransaction(deps, ctx, (tx) =>
    spendCode(tx, eq(emailSignInCodes.id, open.id), now),
  );
  if (!identity) throw invalidCredentials();
  await deps.windows.reset("emailCodeVerify", { account });
  return { identity, ctx, method: "email_code" };
}

/** A dead link: unknown, used, expired or of another tenant, as every mailed link answers it. */
const invalidLink = () => new AppError("not_found", "The link is invalid, expired or already used.");

/**
 * `POST /api/auth/email/link`: signs in with the token of the message's link (256 random bits,
 * stored as SHA-256): spent with the code in one conditional update. On a tenant's host (or with
 * its code) the link must be that tenant's; on the platform host the link names its tenant.
 */
export async function signInWithEmailLink(
  deps: AuthDeps,
  ctx: Ctx,
  input: { token: string },
): Promise<TokenPair | MfaRequired> {
  return completeSignIn(deps, await checkEmailLink(deps, ctx, input));
}

/** The link's check alone (of `signInWithEmailLink`): the sign-in it proves. */
export async function checkEmailLink(deps: AuthDeps, ctx: Ctx, input: { token: string }): Promise<SignIn> {
  const now = deps.clock.now();
  const match = and(
    eq(emailSignInCodes.linkHash, tokenHash(input.token)),
    ctx.tenantId === null ? undefined : eq(emailSignInCodes.tenantId, ctx.tenantId),
  ) as SQL;
  const identity =
    ctx.tenantId === null
      ? await withPlatformTransaction(deps, ctx, (tx) => spendCode(tx, match, now))
      : await withTransaction(deps, ctx, (tx) => spendCode(tx, match, now));
  if (!identity) throw invalidLink();
  return { identity, ctx: { ...ctx, tenantId: identity.tenantId }, method: "email_link" };
}

/**
 * Spends the open, unexpired code `match` finds and returns its user's identity in the code's
 * tenant — null (nothing changed) when there is none, the tenant no longer allows e-mail sign-in,
 * the address is no longer the user's, or the user is not an Active member. The message proved
 * the address: it is marked verified.
 */
async function spendCode(tx: Executor, match: SQL, now: Date): Promise<Identity | null> {
  const [spent] = await tx
    .update(emailSignInCodes)
    .set({ consumedAt: now })
    .where(and(match, isNull(emailSignInCodes.consumedAt), gt(emailSignInCodes.expiresAt, now)))
    .returning({
      tenantId: emailSignInCodes.tenantId,
      userId: emailSignInCodes.userId,
      email: emailSignInCodes.email,
    });
  if (!spent) return null;
  const [tenant] = await tx
    .select({ emailSignIn: tenants.emailSignIn })
    .from(tenants)
    .where(eq(tenants.id, spent.tenantId));
  if (!tenant?.emailSignIn) return null;
  const identity = await loadIdentity(tx, spent.userId, spent.tenantId);
  if (identity?.status !== "Active" || identity.email !== spent.email) return null;
  await tx
    .update(users)
    .set({ emailVerifiedAt: now })
    .where(and(eq(users.id, spent.userId), eq(users.email, spent.email), isNull(users.emailVerifiedAt)));
  return identity;
}
