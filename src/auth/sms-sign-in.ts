import { randomInt } from "node:crypto";
import { and, desc, eq, gt, isNull, type SQL, sql } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import { withTenantOrPlatformDatabase, withTransactionOrPlatform } from "../db/operation.ts";
import { smsCodes, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { assertAllowed } from "../security/windows.ts";
import { completeSignIn } from "./complete-sign-in.ts";
import type { AuthDeps } from "./deps.ts";
import type { MfaRequired } from "./mfa-step.ts";
import { hmac, safeEqual } from "./opaque-tokens.ts";
import { recordSignInFailure } from "./password-sign-in.ts";
import { clientIpOf, invalidCredentials, type TokenPair } from "./sessions.ts";
import { maskPhone } from "./sms.ts";
import { findSignInUser, loadIdentity, sameTenant } from "./user-identity.ts";

/** E.164: `+` and 7 to 15 digits. Spaces, dashes and brackets are dropped first. */
export function normalisePhone(phone: string): string | null {
  const compact = phone.replace(/[\s().-]/g, "");
  return /^\+[1-9]\d{6,14}$/.test(compact) ? compact : null;
}

function smsCodeHash(deps: AuthDeps, tenantId: string | null, phone: string, code: string): string {
  return hmac(deps.smsPepper, `${tenantId ?? "platform"}:${phone}:${code}`);
}

/**
 * Sends a six-digit sign-in code to the phone of an account in `ctx.tenantId`. The answer is the
 * same whether or not an account has that number, and so is its timing: only the phone's validity
 * and the send window (per phone and per IP) are decided before answering; the lookup, the code's
 * storage and the provider call run in the background (`deps.pending`), their failures logged for
 * operators.
 */
export async function sendSmsCode(deps: AuthDeps, ctx: Ctx, input: { phone: string }): Promise<void> {
  const phone = normalisePhone(input.phone);
  if (!phone) {
    throw new AppError("validation_failed", "The phone number is not valid.", {
      fields: [{ path: "phone", message: "must be an E.164 number such as +14155550100" }],
    });
  }
  assertAllowed(
    await deps.windows.consume("smsSend", {
      phone: `${ctx.tenantId ?? "platform"}:${phone}`,
      ip: clientIpOf(ctx),
    }),
  );
  const now = deps.clock.now();
  deps.pending.run("SMS code send", () => deliverSmsCode(deps, ctx, { phone, tenantId: ctx.tenantId, now }));
}

/** The background half of `sendSmsCode`: nothing for an unknown number, else store and send a code. */
async function deliverSmsCode(
  deps: AuthDeps,
  ctx: Ctx,
  input: { phone: string; tenantId: string | null; now: Date },
): Promise<void> {
  const { phone, now } = input;
  // the tenant's context, or the named platform path for platform staff (no tenant)
  const user = await withTenantOrPlatformDatabase(deps, ctx, input.tenantId, (db) =>
    findSignInUser(db, input.tenantId, and(eq(users.phone, phone), eq(users.status, "Active")) as SQL),
  );
  if (!user) return;
  const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
  const lifetime = deps.config.settings.Authentication.Sms.CodeLifetimeSeconds;
  await withTransactionOrPlatform(deps, ctx, async (tx) => {
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

/** Matches no code row: a wrong guess for a number with no open code updates nothing, the same way. */
const NO_CODE_ID = "00000000-0000-0000-0000-000000000000";
/** Compared against when no code is open: never equal to an HMAC (base64url has no `!`). */
const NO_CODE_HASH = "!".repeat(43);

/**
 * Verifies a code: single use, short-lived, compared in constant time; a match signs the user in.
 * A wrong code costs the same work whether or not the number has an account or an open code: the
 * same window write, the same select, the same HMAC and comparison, the same update (of no row when
 * there is no open code), so neither the answer nor its timing tells which numbers are registered.
 */
export async function verifySmsCode(
  deps: AuthDeps,
  ctx: Ctx,
  input: { phone: string; code: string },
): Promise<TokenPair | MfaRequired> {
  try {
    return await signInWithSmsCode(deps, ctx, input);
  } catch (error) {
    if (error instanceof AppError && error.code === "unauthorized") {
      const phone = normalisePhone(input.phone);
      await recordSignInFailure(deps, ctx, {
        method: "sms",
        phone: phone ? maskPhone(phone) : undefined,
        userId: null,
      });
    }
    throw error;
  }
}

async function signInWithSmsCode(
  deps: AuthDeps,
  ctx: Ctx,
  input: { phone: string; code: string },
): Promise<TokenPair | MfaRequired> {
  const { tenantId } = ctx;
  const phone = normalisePhone(input.phone);
  if (!phone || !/^\d{6}$/.test(input.code)) throw invalidCredentials();
  const subject = `${tenantId ?? "platform"}:${phone}`;
  assertAllowed(await deps.windows.consume("smsVerify", { phone: subject, ip: clientIpOf(ctx) }));
  const now = deps.clock.now();
  const [open] = await withTenantOrPlatformDatabase(deps, ctx, tenantId, (db) =>
    db
      .select({ id: smsCodes.id, codeHash: smsCodes.codeHash, attempts: smsCodes.attempts })
      .from(smsCodes)
      .where(
        and(
          sameTenant(smsCodes.tenantId, tenantId),
          eq(smsCodes.phone, phone),
          isNull(smsCodes.consumedAt),
          gt(smsCodes.expiresAt, now),
        ),
      )
      .orderBy(desc(smsCodes.createdAt))
      .limit(1),
  );
  const matches = safeEqual(open?.codeHash ?? NO_CODE_HASH, smsCodeHash(deps, tenantId, phone, input.code));
  if (!open || !matches) {
    const limit = deps.config.settings.Authentication.Sms.VerifyLimit;
    // Updating a row makes the commit wait for the WAL flush; updating none does not. That wait
    // (1-3 ms measured) would tell an attacker which numbers hold an open code, i.e. are registered,
    // so this commit does not wait for it. A database crash in the next few hundred milliseconds
    // could forget one wrong-guess count; the smsVerify window still bounds the guesses.
    await withTransactionOrPlatform(deps, ctx, async (tx) => {
      await tx.execute(sql`set local synchronous_commit = off`);
      await tx
        .update(smsCodes)
        .set({
          attempts: sql`${smsCodes.attempts} + 1`,
          // too many wrong guesses burn the code
          consumedAt: sql`case when ${smsCodes.attempts} + 1 >= ${limit} then ${now.toISOString()}::timestamptz else null end`,
        })
        .where(eq(smsCodes.id, open?.id ?? NO_CODE_ID));
    });
    throw invalidCredentials();
  }
  const identity = await withTenantOrPlatformDatabase(deps, ctx, tenantId, async (db) => {
    const used = await db
      .update(smsCodes)
      .set({ consumedAt: now })
      .where(and(eq(smsCodes.id, open.id), isNull(smsCodes.consumedAt)))
      .returning({ id: smsCodes.id });
    if (used.length === 0) throw invalidCredentials();
    const user = await findSignInUser(db, tenantId, eq(users.phone, phone));
    return user ? loadIdentity(db, user.id, tenantId) : null;
  });
  if (identity?.status !== "Active") throw invalidCredentials();
  await deps.windows.reset("smsVerify", { phone: subject });
  const signIn = { identity, ctx, method: "sms" } as const;
  return completeSignIn(deps, signIn);
}
