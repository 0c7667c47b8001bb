import type { Ctx } from "../context.ts";
import { AppError } from "../errors.ts";
import { type BrowserSignIn, startBrowserSession } from "./browser-sessions.ts";
import type { AuthDeps } from "./deps.ts";
import { codeCheck, completeMfaStep, type FactorCheck, peekMfaStep } from "./mfa-step.ts";
import { amrOfMethod } from "./second-factors.ts";
import { startTokenSession, type TokenPair } from "./sessions.ts";
import { beginTotpEnrolment, confirmPendingTotp } from "./totp-factor.ts";
import { type TrustedDeviceCookie, trustDevice } from "./trusted-devices.ts";

/** A completed sign-in step: a token session's pair, or a browser session (its cookie to set). */
export type MfaCompletion = (
  | { kind: "token"; pair: TokenPair }
  | { kind: "browser"; session: BrowserSignIn }
) & {
  /** An enrolment step: the backup codes of the factor just enrolled, shown this once. */
  backupCodes?: string[];
  /** The step asked to trust this browser and the tenant allows it: the cookie to set. */
  trustedDevice?: TrustedDeviceCookie;
};

/**
 * Completes a sign-in step with any kind of second factor (`check` proves it; docs/auth.md "Second
 * factors: adding a kind") and opens the session the sign-in asked for: a token pair, or a browser
 * session when the step began at the browser sign-in (then only from an allowed origin).
 */
export async function finishMfaSignIn(
  deps: AuthDeps,
  ctx: Ctx,
  input: {
    mfaToken: string;
    method: string;
    check: FactorCheck;
    browserAllowed: boolean;
    enrolment?: boolean;
    /** Trust this browser (`trustDevice: true`): later sign-ins skip the step where the tenant allows it. */
    trustDevice?: boolean;
  },
): Promise<MfaCompletion> {
  const { signIn, kind } = await completeMfaStep(deps, ctx, input);
  const trusted = input.trustDevice ? await trustDevice(deps, signIn) : null;
  const device = trusted ? { trustedDevice: trusted } : {};
  if (kind === "browser") return { kind, session: await startBrowserSession(deps, signIn), ...device };
  return { kind, pair: await startTokenSession(deps, signIn), ...device };
}

/** `POST /api/auth/mfa/verify`: the step completed with a TOTP code or a backup code. */
export async function verifyMfaSignIn(
  deps: AuthDeps,
  ctx: Ctx,
  input: {
    mfaToken: string;
    code?: string;
    backupCode?: string;
    browserAllowed: boolean;
    trustDevice?: boolean;
  },
): Promise<MfaCompletion> {
  const step = await peekMfaStep(deps, ctx, input.mfaToken);
  const code = input.code;
  if (step.methods.length > 0 || code === undefined)
    return finishMfaSignIn(deps, ctx, { ...input, ...codeCheck(deps, input) });
  // an enrolment step: the code confirms the TOTP enrolled with POST /api/auth/mfa/enrolment
  let backupCodes: string[] | undefined;
  const done = await finishMfaSignIn(deps, ctx, {
    ...input,
    method: "totp",
    enrolment: true,
    check: async (txCtx, user) => {
      backupCodes = (await confirmPendingTotp(deps, txCtx, { userId: user.userId, code })) ?? undefined;
      return backupCodes ? amrOfMethod("totp") : null;
    },
  });
  return { ...done, ...(backupCodes ? { backupCodes } : {}) };
}

/**
 * `POST /api/auth/mfa/enrolment`: a TOTP enrolment for the user of an enrolment step (a sign-in the
 * policy holds, without a factor yet); the step stays open for `POST /api/auth/mfa/verify`.
 */
export async function startStepEnrolment(
  deps: AuthDeps,
  ctx: Ctx,
  input: { mfaToken: string },
): Promise<{ uri: string; qrSvg: string }> {
  const step = await peekMfaStep(deps, ctx, input.mfaToken);
  if (step.methods.length > 0)
    throw new AppError("conflict", "The user has a second factor: complete the step with it.");
  return beginTotpEnrolment(deps, { ...ctx, tenantId: step.tenantId }, step.userId);
}
