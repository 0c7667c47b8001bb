import type { AuthDeps } from "./deps.ts";
import { type MfaRequired, mfaStepFor } from "./mfa-step.ts";
import { type SignIn, startTokenSession, type TokenPair } from "./sessions.ts";
import { assertSsoNotEnforced } from "./sso-enforcement.ts";

/**
 * Where every first-factor sign-in that answers a token pair ends — a password
 * (`signInWithPassword`), an e-mailed code or link (src/auth/email-sign-in.ts) — once the credential
 * is verified and the identity is Active in the sign-in's tenant: it opens the token session. The
 * one place a further step hooks in: a user with a second factor gets the step instead (`mfaStepFor`,
 * docs/auth.md "Second factors"); before it, the refusal of an address whose domain must sign in with SSO (`assertSsoNotEnforced`).
 * The browser sign-ins end in `signInBrowser` (password) and `completeBrowserEmailSignIn` (e-mail code
 * or link), which take the same steps first: a step added here belongs there too.
 */
export async function completeSignIn(deps: AuthDeps, signIn: SignIn): Promise<TokenPair | MfaRequired> {
  await assertSsoNotEnforced(deps, signIn);
  return (await mfaStepFor(deps, signIn, "token")) ?? startTokenSession(deps, signIn);
}
