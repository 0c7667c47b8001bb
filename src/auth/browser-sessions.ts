import { eq } from "drizzle-orm";
import type { AppConfig } from "../config/load.ts";
import type { Ctx } from "../context.ts";
import { withTransactionOrPlatform } from "../db/operation.ts";
import { sessions } from "../db/schema/index.ts";
import { signInStep } from "./complete-sign-in.ts";
import type { AuthDeps } from "./deps.ts";
import type { MfaRequired } from "./mfa-step.ts";
import { opaqueToken, safeEqual, tokenHash } from "./opaque-tokens.ts";
import { normaliseOrigin } from "./origins.ts";
import { verifyCredentials } from "./password-sign-in.ts";
import { cachedSession, type OpenSession, type Refusal } from "./session-lookup.ts";
import { insertSessionIfUnchanged, type SignIn } from "./sessions.ts";

/** Data-protection purpose of the session cookie: a cookie of another application does not open. */
const COOKIE_PURPOSE = "browser-session";

/** Whether an `Origin` may use browser authentication (`BrowserAuth:AllowedOrigins`). */
export function browserOriginCheck(config: AppConfig): (origin: string) => boolean {
  const allowed = new Set(config.settings.BrowserAuth.AllowedOrigins.map(normaliseOrigin));
  return (origin) => allowed.has(normaliseOrigin(origin));
}

export interface BrowserSignIn {
  /** The session cookie's value, sealed with data protection; the transport sets it HttpOnly. */
  cookie: string;
  /** For the page to send back on state-changing requests. */
  csrfToken: string;
  /** Lifetime of the session (and of its cookie), in seconds. */
  expiresIn: number;
  passwordChangeRequired: boolean;
}

/**
 * Browser sign-in with e-mail and password: a browser session whose opaque cookie value and CSRF
 * token are only stored hashed. Like a token session, it is only opened while the user row is as
 * the sign-in verified it.
 */
export async function signInBrowser(
  deps: AuthDeps,
  ctx: Ctx,
  input: { email: string; password: string },
): Promise<BrowserSignIn | MfaRequired> {
  return completeBrowserSignIn(deps, await verifyCredentials(deps, ctx, input));
}

/** The browser form of `completeSignIn`: the same step (`signInStep`), else a browser session. */
export async function completeBrowserSignIn(
  deps: AuthDeps,
  signIn: SignIn,
): Promise<BrowserSignIn | MfaRequired> {
  return (await signInStep(deps, signIn, "browser")) ?? startBrowserSession(deps, signIn);
}

/** Opens a browser session for a verified sign-in: its sealed cookie value and CSRF token. */
export async function startBrowserSession(deps: AuthDeps, signIn: SignIn): Promise<BrowserSignIn> {
  const { ctx } = signIn;
  const now = deps.clock.now();
  const seconds = deps.config.settings.BrowserAuth.SessionHours * 3600;
  const cookie = opaqueToken();
  const csrfToken = opaqueToken();
  // one transaction: the user row stays share-locked until the session row is committed
  await withTransactionOrPlatform(deps, ctx, (tx) =>
    insertSessionIfUnchanged(tx, signIn, {
      kind: "browser",
      cookieHash: tokenHash(cookie),
      csrfHash: tokenHash(csrfToken),
      createdAt: now,
      lastUsedAt: now,
      expiresAt: new Date(now.getTime() + seconds * 1000),
    }),
  );
  return {
    cookie: await deps.dataProtection.forPurpose(COOKIE_PURPOSE).protect(cookie),
    csrfToken,
    expiresIn: seconds,
    passwordChangeRequired: signIn.identity.mustChangePassword,
  };
}

/** The open browser session a (sealed) session cookie value names. */
export async function openBrowserSession(
  deps: AuthDeps,
  sealedCookie: string,
): Promise<OpenSession | Refusal> {
  const opened = await deps.dataProtection
    .forPurpose(COOKIE_PURPOSE)
    .unprotect(sealedCookie)
    .catch(() => null);
  if (!opened) return { refused: "The session cookie is not valid here." };
  const cookieHash = tokenHash(opened);
  const session = await cachedSession(deps, `c:${cookieHash}`, () => eq(sessions.cookieHash, cookieHash));
  if (session?.kind !== "browser") return { refused: "The session has ended." };
  return session;
}

/** Whether a request's CSRF token is the one issued with its browser session (constant time). */
export function csrfTokenMatches(session: OpenSession, csrfToken: string | undefined): boolean {
  return !!csrfToken && !!session.csrfHash && safeEqual(tokenHash(csrfToken), session.csrfHash);
}
