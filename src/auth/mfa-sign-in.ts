import type { Ctx } from "../context.ts";
import { type BrowserSignIn, startBrowserSession } from "./browser-sessions.ts";
import type { AuthDeps } from "./deps.ts";
import { codeCheck, completeMfaStep, type FactorCheck } from "./mfa-step.ts";
import { startTokenSession, type TokenPair } from "./sessions.ts";

/** A completed sign-in step: a token session's pair, or a browser session (its cookie to set). */
export type MfaCompletion = { kind: "token"; pair: TokenPair } | { kind: "browser"; session: BrowserSignIn };

/**
 * Completes a sign-in step with any kind of second factor (`check` proves it; docs/auth.md "Second
 * factors: adding a kind") and opens the session the sign-in asked for: a token pair, or a browser
 * session when the step began at the browser sign-in (then only from an allowed origin).
 */
export async function finishMfaSignIn(
  deps: AuthDeps,
  ctx: Ctx,
  input: { mfaToken: string; method: string; check: FactorCheck; browserAllowed: boolean },
): Promise<MfaCompletion> {
  const { signIn, kind } = await completeMfaStep(deps, ctx, input);
  if (kind === "browser") return { kind, session: await startBrowserSession(deps, signIn) };
  return { kind, pair: await startTokenSession(deps, signIn) };
}

/** `POST /api/auth/mfa/verify`: the step completed with a TOTP code or a backup code. */
export async function verifyMfaSignIn(
  deps: AuthDeps,
  ctx: Ctx,
  input: { mfaToken: string; code?: string; backupCode?: string; browserAllowed: boolean },
): Promise<MfaCompletion> {
  return finishMfaSignIn(deps, ctx, { ...input, ...codeCheck(deps, input) });
}
