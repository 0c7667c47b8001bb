import { z } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { browserOriginCheck, signInBrowser } from "../../auth/browser-sessions.ts";
import type { AuthDeps } from "../../auth/deps.ts";
import { changePassword, signInWithPassword } from "../../auth/password-sign-in.ts";
import { logout, refreshSession, revokeCallerSession } from "../../auth/sessions.ts";
import { sendSmsCode, verifySmsCode } from "../../auth/sms-sign-in.ts";
import type { Identity } from "../../auth/user-identity.ts";
import { AppError } from "../../errors.ts";
import { cachedMemberships, type Membership } from "../../identity/memberships.ts";
import type { WindowKind } from "../../security/windows.ts";
import type { TenantLookup } from "../../tenancy/tenant-lookup.ts";
import { defineArea } from "../area.ts";
import { PASSWORD_CHANGE_PATH } from "../middleware/authenticate.ts";
import { tenantCodeAllowed, UNKNOWN_TENANT_ID } from "../middleware/tenancy.ts";
import { accessOf, apiRoute, json, jsonBody, problem, routerPath } from "../openapi.ts";
import { type AppEnv, anonymousCtxOf, createRouter, ctxOf, type Principal } from "../request-context.ts";
import { clearSessionCookie, setSessionCookie } from "../session-cookie.ts";
import { AUTH_ACTIONS } from "./auth-actions.ts";
import {
  browserSession,
  browserSignInResult,
  me,
  mfaRequired,
  signInResult,
  tenantCodeField,
  tokenPair,
} from "./auth-schemas.ts";

/**
 * An E.164 number as the SMS sign-in reads it: `+`, then 7 to 15 digits (the first not 0), with
 * spaces, dots, dashes and brackets allowed anywhere (dropped before the check).
 */
const smsPhone = z
  .string()
  .max(32)
  .regex(
    /^[\s().-]*\+[\s().-]*[1-9](?:[\s().-]*\d){6,14}[\s().-]*$/,
    "must be an E.164 number such as +14155550100",
  )
  .openapi({ example: "+14155550100" });

/**
 * The endpoints that take a credential (password, refresh token, SMS code): the stricter `auth`
 * rate limit applies to these (app.ts). Reading `/api/auth/me` or signing out is an ordinary request.
 */
export const CREDENTIAL_PATHS = [
  "/api/auth/login",
  "/api/auth/refresh",
  PASSWORD_CHANGE_PATH,
  "/api/auth/sms/send",
  "/api/auth/sms/verify",
  "/api/auth/browser/login",
  "/api/auth/password/forgot",
  "/api/auth/password/reset",
  "/api/auth/email/verify",
  "/api/auth/email/code",
  "/api/auth/email/code/verify",
  "/api/auth/email/link",
  "/api/auth/email/change",
  "/api/auth/email/change/confirm",
  "/api/auth/browser/email/code/verify",
  "/api/auth/browser/email/link",
  "/api/auth/switch",
  "/api/auth/signup",
  "/api/auth/signup/verify",
  "/api/auth/passkeys/login/options",
  "/api/auth/passkeys/login/verify",
  "/api/auth/passkeys/register/verify",
  "/api/auth/mfa/verify",
  "/api/auth/mfa/step-up",
  "/api/auth/mfa/totp/confirm",
  "/api/auth/sso/discover",
  "/api/auth/sso/exchange",
  "/api/auth/mfa/enrolment",
] as const;

export { browserSession, mfaRequired, signInResult, tokenPair };

/** The security windows each credential endpoint counts against (advertised as policies, app.ts). */
export const WINDOW_KINDS: Record<string, WindowKind> = {
  "/api/auth/login": "password",
  "/api/auth/browser/login": "password",
  [PASSWORD_CHANGE_PATH]: "password",
  "/api/auth/sms/send": "smsSend",
  "/api/auth/sms/verify": "smsVerify",
  "/api/auth/email/code": "emailCodeSend",
  "/api/auth/email/change": "password",
  "/api/auth/email/code/verify": "emailCodeVerify",
  "/api/auth/browser/email/code/verify": "emailCodeVerify",
  "/api/auth/password/forgot": "passwordReset",
  "/api/auth/signup": "signUp",
  "/api/auth/mfa/verify": "mfaVerify",
  "/api/auth/mfa/step-up": "mfaVerify",
  "/api/auth/mfa/totp/confirm": "mfaVerify",
};

const credentials = z
  .object({
    email: z.string().min(1).max(320),
    password: z.string().min(1).max(1024),
    tenant: tenantCodeField,
  })
  .openapi("Credentials");

const refreshRequest = z.object({ refreshToken: z.string().min(1).max(512) }).openapi("RefreshRequest");

const routes = {
  login: apiRoute("public", {
    method: "post",
    path: "/api/auth/login",
    operationId: "signIn",
    tags: ["auth"],
    summary: "Sign in with e-mail and password.",
    request: { body: jsonBody(credentials) },
    responses: {
      200: json(
        "Signed in, or (a user with a second factor) the step to complete at POST /api/auth/mfa/verify.",
        signInResult,
      ),
      401: problem("Invalid credentials (the same answer for an unknown account)."),
      403: problem(
        "`forbidden`: the tenant enforces single sign-on for this address's domain (docs/sso.md).",
      ),
      429: problem("Too many attempts."),
    },
  }),
  refresh: apiRoute("public", {
    method: "post",
    path: "/api/auth/refresh",
    operationId: "refreshTokens",
    tags: ["auth"],
    summary: "Rotate a refresh token. Reusing a spent one revokes the session.",
    request: { body: jsonBody(refreshRequest) },
    responses: { 200: json("New token pair.", tokenPair), 401: problem("Invalid refresh token.") },
  }),
  logout: apiRoute("public", {
    method: "post",
    path: "/api/auth/logout",
    operationId: "signOut",
    tags: ["auth"],
    summary: "End the session a refresh token belongs to.",
    request: { body: jsonBody(refreshRequest) },
    responses: { 204: { description: "Signed out." } },
  }),
  password: apiRoute(
    "signedIn",
    {
      method: "post",
      path: PASSWORD_CHANGE_PATH,
      operationId: "changePassword",
      tags: ["auth"],
      summary: "Change the password; ends every session of the user, this one included.",
      description:
        "With a bearer token: 200 and the token pair of a fresh session (the old access and refresh " +
        "tokens stop working). With the browser session cookie (and X-CSRF-Token): 204, the cookie is " +
        "cleared and the page signs in again with the new password.",
      request: {
        body: jsonBody(
          z
            .object({
              currentPassword: z.string().min(1).max(1024),
              newPassword: z.string().min(1).max(1024),
            })
            .openapi("PasswordChange"),
        ),
      },
      responses: {
        200: json("Changed (token session); fresh tokens.", tokenPair),
        204: { description: "Changed (browser session); the session ended and its cookie is cleared." },
        401: problem("Wrong current password."),
      },
    },
    { cookies: true },
  ),
  smsSend: apiRoute("public", {
    method: "post",
    path: "/api/auth/sms/send",
    operationId: "sendSmsCode",
    tags: ["auth"],
    summary: "Send a six-digit sign-in code (same answer whether or not the number is known).",
    description:
      "Answers 202 as soon as the number is valid and the send windows allow it, before looking the " +
      "number up: the code is stored and sent in the background, so the answer and its timing are the " +
      "same for a known and an unknown number. Delivery failures are logged, never returned.",
    request: {
      body: jsonBody(
        z.object({ phone: smsPhone, tenant: z.string().min(1).max(64).optional() }).openapi("SmsCodeRequest"),
      ),
    },
    responses: { 202: { description: "Accepted." }, 429: problem("Too many codes sent.") },
  }),
  smsVerify: apiRoute("public", {
    method: "post",
    path: "/api/auth/sms/verify",
    operationId: "verifySmsCode",
    tags: ["auth"],
    summary: "Sign in with an SMS code.",
    request: {
      body: jsonBody(
        z
          .object({
            phone: smsPhone,
            code: z.string().min(1).max(16),
            tenant: z.string().min(1).max(64).optional(),
          })
          .openapi("SmsVerification"),
      ),
    },
    responses: {
      200: json("Signed in, or the second-factor step.", signInResult),
      401: problem("Wrong, expired or used code."),
      403: problem(
        "`forbidden`: the tenant enforces single sign-on for this address's domain (docs/sso.md).",
      ),
    },
  }),
  me: apiRoute("signedIn", {
    method: "get",
    path: "/api/auth/me",
    operationId: "getMe",
    tags: ["auth"],
    summary: "The caller: user, tenant, roles and memberships.",
    responses: {
      200: json("The caller.", me),
    },
  }),
  browserLogin: apiRoute(
    "public",
    {
      method: "post",
      path: "/api/auth/browser/login",
      operationId: "browserSignIn",
      tags: ["auth"],
      summary: "Browser sign-in: sets an HttpOnly session cookie; only from BrowserAuth:AllowedOrigins.",
      request: { body: jsonBody(credentials) },
      responses: {
        200: json(
          "Signed in (send csrfToken back as X-CSRF-Token on state-changing requests), or the second-factor step (no cookie yet).",
          browserSignInResult,
        ),
        401: problem("Invalid credentials (the same answer for an unknown account)."),
        403: problem("Origin not allowed."),
      },
    },
    { cookies: true },
  ),
  browserLogout: apiRoute(
    "signedIn",
    {
      method: "post",
      path: "/api/auth/browser/logout",
      operationId: "browserSignOut",
      tags: ["auth"],
      summary: "End the browser session (cookie and X-CSRF-Token).",
      responses: { 204: { description: "Signed out." } },
    },
    { cookies: true },
  ),
};

/** The admin an impersonated session acts for, as `/me` shows it. */
const impersonatorOf = (principal: AppEnv["Variables"]["principal"]) =>
  principal && principal.kind !== "apiKey" && principal.impersonatorId
    ? { id: principal.impersonatorId }
    : null;

/** `/me`'s answer (the route's, and the edge's fast lane's: src/http/fast-lane.ts). */
export function meOf(identity: Identity, principal: Principal | undefined, memberships: Membership[]) {
  const tenant = identity.tenantId ? { id: identity.tenantId, code: identity.tenantCode ?? "" } : null;
  return {
    user: { id: identity.userId, email: identity.email, name: identity.name },
    tenant,
    roles: identity.roles,
    platformRoles: identity.platformRoles,
    memberships,
    impersonator: impersonatorOf(principal),
  };
}

export interface AuthRouteDeps extends AuthDeps {
  tenants: TenantLookup;
}

/**
 * The tenant a sign-in is for: the host's, else the `tenant` code in the body, else none (platform
 * staff). An unknown code, or a body code that contradicts the host, signs in to a tenant with no
 * users (`unknownTenant`): the attempt then costs a password hash, counts against the windows and
 * fails like a wrong password, so neither the answer nor its timing tells which codes exist.
 */
export async function signInTenant(
  deps: AuthRouteDeps,
  c: Context<AppEnv>,
  code: string | undefined,
): Promise<string | null> {
  const fromHost = c.get("tenant");
  if (fromHost) {
    if (code && code.toLowerCase() !== fromHost.code) return UNKNOWN_TENANT_ID;
    return fromHost.id;
  }
  if (!code) return null;
  // the body's code obeys Tenancy:Resolution:TenantCodePaths like X-Tenant and ?tenant= do
  if (!tenantCodeAllowed(deps.config.settings.Tenancy.Resolution.TenantCodePaths, c.req.path))
    throw new AppError("bad_request", "A tenant code is not accepted on this path.");
  return (await deps.tenants.byCode(code))?.id ?? UNKNOWN_TENANT_ID;
}

/**
 * Public sign-in routes. `authenticated` runs on the routes declared for signed-in callers (/me,
 * /password, /browser/logout), on their path whatever the method (the caller passes it, so the same
 * middleware serves every protected route).
 */
export function authRoutes(deps: AuthRouteDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const browserOriginAllowed = browserOriginCheck(deps.config);
  const router = createRouter();
  for (const route of Object.values(routes))
    if (accessOf(route) === "signedIn") router.use(routerPath(route), authenticated);

  return router
    .openapi(routes.login, async (c) => {
      const { tenant, ...credentials } = c.req.valid("json");
      const ctx = anonymousCtxOf(c, await signInTenant(deps, c, tenant));
      const pair = await signInWithPassword(deps, ctx, credentials);
      c.header("cache-control", "no-store");
      return c.json(pair, 200);
    })
    .openapi(routes.refresh, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await refreshSession(deps, anonymousCtxOf(c), c.req.valid("json")), 200);
    })
    .openapi(routes.logout, async (c) => {
      // signing out with a refresh token needs no access token: the caller is anonymous
      await logout(deps, anonymousCtxOf(c), c.req.valid("json"));
      return c.body(null, 204);
    })
    .openapi(routes.password, async (c) => {
      const pair = await changePassword(deps, ctxOf(c), c.req.valid("json"));
      if (!pair) {
        // a browser session: ended with every other session; the page signs in again
        clearSessionCookie(c);
        return c.body(null, 204);
      }
      c.header("cache-control", "no-store");
      return c.json(pair, 200);
    })
    .openapi(routes.smsSend, async (c) => {
      const { tenant, phone } = c.req.valid("json");
      // an unknown tenant code gets the same answer as an unknown number
      await sendSmsCode(deps, anonymousCtxOf(c, await signInTenant(deps, c, tenant)), { phone });
      return c.body(null, 202);
    })
    .openapi(routes.smsVerify, async (c) => {
      const { tenant, ...input } = c.req.valid("json");
      const ctx = anonymousCtxOf(c, await signInTenant(deps, c, tenant));
      c.header("cache-control", "no-store");
      return c.json(await verifySmsCode(deps, ctx, input), 200);
    })
    .openapi(routes.me, async (c) => {
      const identity = c.get("identity");
      if (!identity) throw new AppError("unauthorized");
      return c.json(meOf(identity, c.get("principal"), await cachedMemberships(deps, ctxOf(c))), 200);
    })
    .openapi(routes.browserLogin, async (c) => {
      const origin = c.req.header("origin");
      if (!origin || !browserOriginAllowed(origin)) {
        throw new AppError("forbidden", "This origin may not use browser authentication.");
      }
      const { tenant, ...credentials } = c.req.valid("json");
      const ctx = anonymousCtxOf(c, await signInTenant(deps, c, tenant));
      const signedIn = await signInBrowser(deps, ctx, credentials);
      c.header("cache-control", "no-store");
      if ("mfaRequired" in signedIn) return c.json(signedIn, 200);
      const { cookie, ...session } = signedIn;
      setSessionCookie(c, deps.config, cookie, session.expiresIn);
      c.header("cache-control", "no-store");
      return c.json(session, 200);
    })
    .openapi(routes.browserLogout, async (c) => {
      await revokeCallerSession(deps, ctxOf(c));
      clearSessionCookie(c);
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const authArea = defineArea({ name: "auth", routes: [authRoutes], auditActions: AUTH_ACTIONS });
