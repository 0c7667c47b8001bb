import type { AuthDeps } from "./deps.ts";
import { type MfaRequired, mfaStepFor, type StepKind } from "./mfa-step.ts";
import { type SignIn, startTokenSession, type TokenPair } from "./sessions.ts";
import { assertSsoNotEnforced } from "./sso-enforcement.ts";

/**
 * The policies every sign-in takes between its verified credential and its session, whatever the
 * credential (a password, an e-mailed code or link, an SMS code, a passkey, an accepted invitation):
 * the refusal of an address whose domain must sign in with SSO (`assertSsoNotEnforced`), then the
 * second-factor step (`mfaStepFor`: null when the user needs none). A policy added here holds for
 * every sign-in, token or browser.
 */
export async function signInStep(
  deps: AuthDeps,
  signIn: SignIn,
  kind: StepKind,
): Promise<MfaRequired | null> {
  await assertSsoNotEnforced(deps, signIn);
  return mfaStepFor(deps, signIn, kind);
}

/**
 * Where every sign-in that answers a token pair ends once the credential is verified and the identity
 * is Active in the sign-in's tenant: the step (`signInStep`) or the token session. The browser
 * sign-ins end in `completeBrowserSignIn` (src/auth/browser-sessions.ts), which takes the same step.
 */
export async function completeSignIn(deps: AuthDeps, signIn: SignIn): Promise<TokenPair | MfaRequired> {
  return (await signInStep(deps, signIn, "token")) ?? startTokenSession(deps, signIn);
}
