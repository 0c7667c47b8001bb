import { createRoute, z } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { normaliseOrigin } from "../../auth/origins.ts";
import {
  type AuthDeps,
  changePassword,
  login,
  logout,
  refresh,
  revokeSession,
  sendSmsCode,
  verifyCredentials,
  verifySmsCode,
} from "../../auth/service.ts";
import { AppError } from "../../errors.ts";
import type { TenantLookup } from "../../tenancy/lookup.ts";
import { clientIp } from "../client-ip.ts";
import { type AppEnv, createRouter, principalOf } from "../context.ts";
import { clearBrowserSession, PASSWORD_CHANGE_PATH, startBrowserSession } from "../middleware/auth.ts";
import { tenantCodeAllowed, UNKNOWN_TENANT_ID } from "../middleware/tenancy.ts";
import { problemSchema } from "../openapi.ts";

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
] as const;

const tokenPair = z
  .object({
    accessToken: z.string(),
    tokenType: z.literal("Bearer"),
    expiresIn: z.number().int(),
    refreshToken: z.string(),
    passwordChangeRequired: z.boolean(),
  })
  .openapi("TokenPair");

const credentials = z
  .object({
    email: z.string().min(1).max(320),
    password: z.string().min(1).max(1024),
    tenant: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .openapi({ description: "Tenant code (on the platform host)." }),
  })
  .openapi("Credentials");

const json = <T extends z.ZodType>(schema: T) => ({
  content: { "application/json": { schema } },
  required: true,
});
const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: problemSchema } },
});
const ok = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

const routes = {
  login: createRoute({
    method: "post",
    path: "/api/auth/login",
    tags: ["auth"],
    summary: "Sign in with e-mail and password.",
    request: { body: json(credentials) },
    responses: {
      200: ok(tokenPair, "Signed in."),
      401: problem("Invalid credentials (the same answer for an unknown account)."),
      429: problem("Too many attempts."),
    },
  }),
  refresh: createRoute({
    method: "post",
    path: "/api/auth/refresh",
    tags: ["auth"],
    summary: "Rotate a refresh token. Reusing a spent one revokes the session.",
    request: { body: json(z.object({ refreshToken: z.string().min(1).max(512) })) },
    responses: { 200: ok(tokenPair, "New token pair."), 401: problem("Invalid refresh token.") },
  }),
  logout: createRoute({
    method: "post",
    path: "/api/auth/logout",
    tags: ["auth"],
    summary: "End the session a refresh token belongs to.",
    request: { body: json(z.object({ refreshToken: z.string().min(1).max(512) })) },
    responses: { 204: { description: "Signed out." } },
  }),
  password: createRoute({
    method: "post",
    path: PASSWORD_CHANGE_PATH,
    tags: ["auth"],
    summary: "Change the password; ends the user's other sessions.",
    description:
      "With a bearer token: 200 and a fresh token pair for this session. With the browser session " +
      "cookie (and X-CSRF-Token): 204 and no tokens; the cookie session continues.",
    security: [{ bearer: [] }],
    request: {
      body: json(
        z.object({ currentPassword: z.string().min(1).max(1024), newPassword: z.string().min(1).max(1024) }),
      ),
    },
    responses: {
      200: ok(tokenPair, "Changed (token session); fresh tokens."),
      204: { description: "Changed (browser session); the cookie session continues." },
      401: problem("Wrong current password."),
    },
  }),
  smsSend: createRoute({
    method: "post",
    path: "/api/auth/sms/send",
    tags: ["auth"],
    summary: "Send a six-digit sign-in code (same answer whether or not the number is known).",
    description:
      "Answers 202 as soon as the number is valid and the send windows allow it, before looking the " +
      "number up: the code is stored and sent in the background, so the answer and its timing are the " +
      "same for a known and an unknown number. Delivery failures are logged, never returned.",
    request: {
      body: json(
        z.object({ phone: z.string().min(1).max(32), tenant: z.string().min(1).max(64).optional() }),
      ),
    },
    responses: { 202: { description: "Accepted." }, 429: problem("Too many codes sent.") },
  }),
  smsVerify: createRoute({
    method: "post",
    path: "/api/auth/sms/verify",
    tags: ["auth"],
    summary: "Sign in with an SMS code.",
    request: {
      body: json(
        z.object({
          phone: z.string().min(1).max(32),
          code: z.string().min(1).max(16),
          tenant: z.string().min(1).max(64).optional(),
        }),
      ),
    },
    responses: { 200: ok(tokenPair, "Signed in."), 401: problem("Wrong, expired or used code.") },
  }),
  me: createRoute({
    method: "get",
    path: "/api/auth/me",
    tags: ["auth"],
    summary: "The caller: user, tenant and roles.",
    security: [{ bearer: [] }],
    responses: {
      200: ok(
        z
          .object({
            user: z.object({ id: z.string(), email: z.string(), name: z.string() }),
            tenant: z.object({ id: z.string(), code: z.string() }).nullable(),
            roles: z.array(z.string()),
            platformRoles: z.array(z.string()),
          })
          .openapi("Me"),
        "The caller.",
      ),
    },
  }),
  browserLogin: createRoute({
    method: "post",
    path: "/api/auth/browser/login",
    tags: ["auth"],
    summary: "Browser sign-in: sets an HttpOnly session cookie; only from BrowserAuth:AllowedOrigins.",
    request: { body: json(credentials) },
    responses: {
      200: ok(
        z.object({ csrfToken: z.string(), expiresIn: z.number().int(), passwordChangeRequired: z.boolean() }),
        "Signed in; send csrfToken back as X-CSRF-Token on state-changing requests.",
      ),
      403: problem("Origin not allowed."),
    },
  }),
  browserLogout: createRoute({
    method: "post",
    path: "/api/auth/browser/logout",
    tags: ["auth"],
    summary: "End the browser session (cookie and X-CSRF-Token).",
    responses: { 204: { description: "Signed out." } },
  }),
};

export interface AuthRouteDeps extends AuthDeps {
  tenants: TenantLookup;
}

/**
 * The tenant a sign-in is for: the host's, else the `tenant` code in the body, else none (platform
 * staff). An unknown code, or a body code that contradicts the host, signs in to a tenant with no
 * users (`unknownTenant`): the attempt then costs a password hash, counts against the windows and
 * fails like a wrong password, so neither the answer nor its timing tells which codes exist.
 */
async function signInTenant(
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
 * Public sign-in routes. `authenticated` guards /me, /password and /browser/logout (the caller
 * mounts it, so the same middleware serves every protected route).
 */
export function authRoutes(deps: AuthRouteDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const browserOrigins = new Set(deps.config.settings.BrowserAuth.AllowedOrigins.map(normaliseOrigin));
  const router = createRouter();
  router.use("/api/auth/me", authenticated);
  router.use(PASSWORD_CHANGE_PATH, authenticated);
  router.use("/api/auth/browser/logout", authenticated);

  return router
    .openapi(routes.login, async (c) => {
      const body = c.req.valid("json");
      const tenantId = await signInTenant(deps, c, body.tenant);
      const pair = await login(deps, {
        email: body.email,
        password: body.password,
        tenantId,
        ip: clientIp(c),
      });
      c.header("cache-control", "no-store");
      return c.json(pair, 200);
    })
    .openapi(routes.refresh, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await refresh(deps, c.req.valid("json").refreshToken, c.get("tenant")?.id), 200);
    })
    .openapi(routes.logout, async (c) => {
      await logout(deps, c.req.valid("json").refreshToken, c.get("tenant")?.id);
      return c.body(null, 204);
    })
    .openapi(routes.password, async (c) => {
      const body = c.req.valid("json");
      const pair = await changePassword(deps, principalOf(c), { ...body, ip: clientIp(c) });
      if (!pair) return c.body(null, 204);
      c.header("cache-control", "no-store");
      return c.json(pair, 200);
    })
    .openapi(routes.smsSend, async (c) => {
      const body = c.req.valid("json");
      // an unknown tenant code gets the same answer as an unknown number
      const tenantId = await signInTenant(deps, c, body.tenant);
      await sendSmsCode(deps, { phone: body.phone, tenantId, ip: clientIp(c) });
      return c.body(null, 202);
    })
    .openapi(routes.smsVerify, async (c) => {
      const body = c.req.valid("json");
      const tenantId = await signInTenant(deps, c, body.tenant);
      c.header("cache-control", "no-store");
      return c.json(await verifySmsCode(deps, { ...body, tenantId, ip: clientIp(c) }), 200);
    })
    .openapi(routes.me, async (c) => {
      const identity = c.get("identity");
      if (!identity) throw new AppError("unauthorized");
      const tenant = identity.tenantId ? { id: identity.tenantId, code: identity.tenantCode ?? "" } : null;
      return c.json(
        {
          user: { id: identity.userId, email: identity.email, name: identity.name },
          tenant,
          roles: identity.roles,
          platformRoles: identity.platformRoles,
        },
        200,
      );
    })
    .openapi(routes.browserLogin, async (c) => {
      const origin = c.req.header("origin");
      if (!origin || !browserOrigins.has(normaliseOrigin(origin))) {
        throw new AppError("forbidden", "This origin may not use browser authentication.");
      }
      const body = c.req.valid("json");
      const tenantId = await signInTenant(deps, c, body.tenant);
      const signIn = await verifyCredentials(deps, { ...body, tenantId, ip: clientIp(c) });
      const session = await startBrowserSession(deps, c, signIn);
      c.header("cache-control", "no-store");
      return c.json({ ...session, passwordChangeRequired: signIn.identity.mustChangePassword }, 200);
    })
    .openapi(routes.browserLogout, async (c) => {
      await revokeSession(deps, principalOf(c).sessionId, "logout", deps.clock.now());
      clearBrowserSession(c);
      return c.body(null, 204);
    });
}
