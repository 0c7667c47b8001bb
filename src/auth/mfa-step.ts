import { and, eq, gt, isNull } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Tx } from "../db/client.ts";
import {
  withDatabase,
  withPlatformDatabase,
  withTenantOrPlatformDatabase,
  withTransactionOrPlatform,
} from "../db/operation.ts";
import { singleUseTokens, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { assertAllowed } from "../security/windows.ts";
import { useBackupCode } from "./backup-codes.ts";
import type { AuthDeps } from "./deps.ts";
import { tokenHash } from "./opaque-tokens.ts";
import { recordSignInFailure } from "./password-sign-in.ts";
import { amrOfMethod, enrolledMethods } from "./second-factors.ts";
import { enrolmentDue } from "./security-policy.ts";
import { authOf } from "./session-auth.ts";
import { clientIpOf, type SignIn } from "./sessions.ts";
import { consumeSingleUseToken, issueSingleUseToken } from "./single-use-tokens.ts";
import { useTotpCode } from "./totp-factor.ts";
import { trustedDeviceSkips } from "./trusted-devices.ts";
import { loadIdentity } from "./user-identity.ts";

/** What a sign-in answers instead of tokens when the user has a second factor (no tokens, no cookie). */
export interface MfaRequired {
  mfaRequired: true;
  /** The step token: `POST /api/auth/mfa/verify` completes the sign-in with it, once. */
  mfaToken: string;
  /** The second factors the user can prove (`SECOND_FACTORS`). */
  methods: string[];
  /** Seconds the step token works (`Authentication:Mfa:StepTokenSeconds`). */
  expiresIn: number;
  /**
   * The user has no second factor and must enrol one to sign in (the tenant's policy, or platform
   * staff in Production): `POST /api/auth/mfa/enrolment`, then `POST /api/auth/mfa/verify` with a code.
   */
  enrolmentRequired?: true;
}

/** Which session the completed step opens: the sign-in's own kind. */
export type StepKind = "token" | "browser";

/** The user and tenant a step token is bound to. */
export interface StepUser {
  userId: string;
  tenantId: string | null;
}

/**
 * How a kind of second factor proves itself on the step's transaction (the `ctx.tx`): the `amr` values
 * it adds, or null when the proof fails (the transaction then rolls back and the step token stays
 * usable until it expires; the attempt counted in the second-factor windows). A proof spends what it
 * uses on `ctx.tx` (a TOTP step, a backup code, a passkey's counter), so it commits with the step.
 */
export type FactorCheck = (ctx: Ctx & { tx: Tx }, user: StepUser) => Promise<readonly string[] | null>;

const PURPOSE = "mfa_sign_in";
const unknownStep = () => new AppError("unauthorized", "The sign-in step is unknown, used or expired.");
const wrongFactor = () => new AppError("unauthorized", "The second factor does not match.");

/**
 * The step a verified sign-in must take before it gets a session, or null when the user has no
 * second factor (or the sign-in proved one already, or comes from a browser trusted in this tenant). The step token (256 random bits, stored as SHA-256 in `single_use_tokens`, purpose
 * `mfa_sign_in`) is bound to the user, the tenant signed in to, the first factor and the session kind.
 */
export async function mfaStepFor(
  deps: AuthDeps,
  signIn: SignIn,
  kind: StepKind,
): Promise<MfaRequired | null> {
  // a sign-in that proved a second factor itself (a passkey alone) has taken the step
  if (signIn.auth?.amr.includes("mfa")) return null;
  const { userId, tenantId } = signIn.identity;
  const methods = await withTenantOrPlatformDatabase(deps, signIn.ctx, signIn.ctx.tenantId, (db) =>
    enrolledMethods(db, userId, tenantId),
  );
  const enrolment = methods.length === 0;
  if (enrolment && !(await enrolmentDue(deps, signIn.ctx, signIn.identity))) return null;
  // a browser the user trusted at an earlier step, where the tenant allows it: no step (amr stays the first factor's)
  if (!enrolment && (await trustedDeviceSkips(deps, signIn))) return null;
  const seconds = deps.config.settings.Authentication.Mfa.StepTokenSeconds;
  const issued = await issueSingleUseToken(deps, signIn.ctx, {
    purpose: PURPOSE,
    tenantId,
    userId,
    subject: `${signIn.method} ${kind}`,
    lifetimeSeconds: seconds,
  });
  return {
    mfaRequired: true,
    mfaToken: issued.token,
    methods,
    expiresIn: seconds,
    ...(enrolment ? { enrolmentRequired: true as const } : {}),
  };
}

/**
 * The open step a token names in the request's tenant (`ctx.tenantId`), without spending it: for a
 * factor that must prepare a challenge first (a passkey's options). 401 when unknown, used or expired.
 */
export async function peekMfaStep(
  deps: AuthDeps,
  ctx: Ctx,
  mfaToken: string,
): Promise<StepUser & { methods: string[]; kind: StepKind; createdAt: Date; method: SignIn["method"] }> {
  const now = deps.clock.now();
  // on the platform host the tenant is not known until the step names it: the named platform path
  const lookup = ctx.tenantId === null ? withPlatformDatabase : withDatabase;
  const [row] = await lookup(deps, ctx, (db) =>
    db
      .select({
        userId: singleUseTokens.userId,
        tenantId: singleUseTokens.tenantId,
        subject: singleUseTokens.subject,
        createdAt: singleUseTokens.createdAt,
      })
      .from(singleUseTokens)
      .where(
        and(
          eq(singleUseTokens.tokenHash, tokenHash(mfaToken)),
          eq(singleUseTokens.purpose, PURPOSE),
          isNull(singleUseTokens.usedAt),
          gt(singleUseTokens.expiresAt, now),
        ),
      )
      .limit(1),
  );
  // on a tenant's host (or with its code) a step of another tenant is unknown; on the platform host
  // the step itself says which tenant (or platform staff) it signs in to
  if (!row?.userId || (ctx.tenantId !== null && row.tenantId !== ctx.tenantId)) throw unknownStep();
  const [method, kind] = (row.subject ?? "").split(" ") as [SignIn["method"], StepKind];
  const { userId, tenantId } = row;
  // what the user can prove in the step's tenant, read in its context (the platform host has none)
  const methods = await withTenantOrPlatformDatabase(deps, ctx, tenantId, (db) =>
    enrolledMethods(db, userId, tenantId),
  );
  return { userId, tenantId, methods, kind, createdAt: row.createdAt, method };
}

/**
 * Completes a sign-in step with a second factor of kind `method` that `check` proves: counted in the
 * second-factor windows (per user and per address), then in one transaction the step token is spent
 * (one conditional update: of two uses at once one wins), the factor proved and the user checked
 * (still Active, password unchanged since the step began). The sign-in it answers carries `amr` =
 * the first factor's, the factor's and `mfa`. The caller opens the session (`finishMfaSignIn`).
 */
export async function completeMfaStep(
  deps: AuthDeps,
  ctx: Ctx,
  input: {
    mfaToken: string;
    method: string;
    check: FactorCheck;
    browserAllowed?: boolean;
    enrolment?: boolean;
  },
): Promise<{ signIn: SignIn; kind: StepKind }> {
  const step = await peekMfaStep(deps, ctx, input.mfaToken);
  if (step.kind === "browser" && !input.browserAllowed)
    throw new AppError("forbidden", "This origin may not use browser authentication.");
  assertAllowed(await deps.windows.consume("mfaVerify", { account: step.userId, ip: clientIpOf(ctx) }));
  // an enrolment step (no factor yet) is completed by confirming the factor just enrolled
  const allowed = input.enrolment ? step.methods.length === 0 : step.methods.includes(input.method);
  if (!allowed) throw wrongFactor();
  const now = deps.clock.now();
  const stepCtx: Ctx = { ...ctx, tenantId: step.tenantId };
  const done = await withTransactionOrPlatform(deps, stepCtx, async (tx, txCtx) => {
    const spent = await consumeSingleUseToken(deps, txCtx, {
      purpose: PURPOSE,
      token: input.mfaToken,
      tenantId: step.tenantId,
    });
    if (!spent) throw unknownStep();
    const [user] = await tx
      .select({ status: users.status, passwordChangedAt: users.passwordChangedAt })
      .from(users)
      .where(eq(users.id, step.userId));
    // a password changed (or reset) after the first factor was checked voids the step
    if (user?.status !== "Active" || (user.passwordChangedAt && user.passwordChangedAt > step.createdAt))
      throw unknownStep();
    const proved = await input.check(txCtx, step);
    if (!proved) throw wrongFactor();
    return { proved, identity: await loadIdentity(tx, step.userId, step.tenantId) };
  }).catch(async (error: unknown) => {
    if (error instanceof AppError && error.code === "unauthorized")
      await recordSignInFailure(deps, stepCtx, { method: "mfa", userId: step.userId });
    throw error;
  });
  const { identity, proved } = done;
  if (identity?.status !== "Active") throw unknownStep();
  await deps.windows.reset("mfaVerify", { account: step.userId });
  const first = authOf({ identity, ctx, method: step.method }, now).amr;
  const amr = [...new Set([...first, ...proved, "mfa"])];
  return {
    signIn: { identity, ctx: stepCtx, method: step.method, auth: { amr, authTime: now } },
    kind: step.kind,
  };
}

/** The `FactorCheck` of a code the user typed: a TOTP code, or one of their backup codes. */
export function codeCheck(
  deps: AuthDeps,
  input: { code?: string; backupCode?: string },
): {
  method: string;
  check: FactorCheck;
} {
  if (input.backupCode !== undefined) {
    const code = input.backupCode;
    return {
      method: "backup_code",
      check: async (ctx, user) =>
        (await useBackupCode(deps, ctx, { userId: user.userId, code })) ? amrOfMethod("backup_code") : null,
    };
  }
  if (input.code !== undefined) {
    const code = input.code;
    return {
      method: "totp",
      check: async (ctx, user) =>
        (await useTotpCode(deps, ctx, { userId: user.userId, code })) ? amrOfMethod("totp") : null,
    };
  }
  throw new AppError("validation_failed", "Give `code` or `backupCode`.", {
    fields: [{ path: "code", message: "required (or backupCode)" }],
  });
}
