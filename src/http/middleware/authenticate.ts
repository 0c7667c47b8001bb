import type { Context, MiddlewareHandler, Next } from "hono";
import { isApiKeyShaped } from "../../api-keys/format.ts";
import { apiKeyUseRecorder, openApiKey } from "../../api-keys/key-lookup.ts";
import { browserOriginCheck, csrfTokenMatches, openBrowserSession } from "../../auth/browser-sessions.ts";
import type { AuthDeps } from "../../auth/deps.ts";
import { openTokenSession, rememberedTokenSession } from "../../auth/session-lookup.ts";
import { AppError } from "../../errors.ts";
import { type AppEnv, type Principal, tenantCtxOf, unauthorized } from "../request-context.ts";
import { readSessionCookie } from "../session-cookie.ts";

export const CSRF_HEADER = "x-csrf-token";
/** The one route a token that must change its password may use. */
export const PASSWORD_CHANGE_PATH = "/api/auth/password";
/** What a user who must change the password may still do: change it, or sign out of the browser. */
const ALLOWED_BEFORE_CHANGE = new Set([PASSWORD_CHANGE_PATH, "/api/auth/browser/logout"]);

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * What an impersonated session may not touch (docs/auth.md, "Impersonation"): the user's password
 * (change and reset), second factors and passkeys, the address (its change), and the tenant's API keys.
 */
const REFUSED_TO_IMPERSONATION = [
  PASSWORD_CHANGE_PATH,
  "/api/auth/password/",
  "/api/auth/mfa",
  "/api/auth/passkeys",
  "/api/auth/email/change",
  "/api/tenant/api-keys",
];
const refusedToImpersonation = (path: string) =>
  REFUSED_TO_IMPERSONATION.some((p) => path === p || path.startsWith(p.endsWith("/") ? p : `${p}/`));

/** Where a tenant API key is a credential; `/api/admin/*` does not know keys (401), the rest refuses them (403). */
const API_KEY_AREA = "/api/tenant/";
const ADMIN_AREA = "/api/admin/";

/**
 * The token of an `Authorization: Bearer <token>` header. Another scheme carries no bearer token (a
 * bare challenge, 401); a Bearer header must hold one token, nothing else. The common form (`Bearer`
 * and one space) is read without running the token, ~800 characters, through a capturing pattern.
 */
export function bearerToken(header: string): string {
  if (header.startsWith("Bearer ")) {
    const token = header.slice(7);
    if (token !== "" && !/\s/.test(token)) return token;
  }
  if (!/^Bearer(\s|$)/i.test(header)) throw unauthorized("Use the Bearer authentication scheme.");
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  if (!match?.[1]) throw unauthorized("Malformed Authorization header.", { invalidToken: true });
  return match[1];
}

type Found = Awaited<ReturnType<typeof openTokenSession>>;
type OpenFound = Exclude<Found, { refused: string }>;

/**
 * The principal an open session admits to `method` `path` on the request's tenant (`tenantId`: the
 * host's, undefined on the platform host), or the refusal thrown: the checks every credential passes
 * (`authenticate`; the edge's fast lane, src/http/fast-lane.ts, declines a request this refuses).
 */
export function admission(
  found: OpenFound,
  tenantId: string | undefined,
  method: string,
  path: string,
): Principal {
  const { identity, sessionId, impersonatorId } = found;
  // roles and flags come from the database (at most SessionCacheSeconds old), not from the token
  const principal: Principal = {
    userId: identity.userId,
    tenantId: identity.tenantId,
    roles: identity.roles,
    platformRoles: identity.platformRoles,
    sessionId,
    ...(impersonatorId ? { impersonatorId } : {}),
  };
  if (tenantId !== undefined && principal.tenantId !== tenantId)
    throw new AppError("not_found", "No such resource.");
  if (identity.mustChangePassword && !(method === "POST" && ALLOWED_BEFORE_CHANGE.has(path))) {
    throw new AppError("password_change_required", "Change your password first (POST /api/auth/password).");
  }
  if (impersonatorId && refusedToImpersonation(path))
    throw new AppError(
      "forbidden",
      "An impersonated session cannot change passwords, second factors or API keys.",
    );
  return principal;
}

/**
 * Authenticates a request from `Authorization: Bearer <access token>`, `Authorization: Bearer
 * plk_…` (a tenant API key, on `/api/tenant/*` only: docs/api-keys.md) or, for browsers, the
 * session cookie (only from `BrowserAuth:AllowedOrigins`, and with the CSRF header on
 * state-changing requests). The session behind either must still be open, so logout and
 * disabling a user take effect at once. A token of another tenant than the request's host gets
 * 404: on tenant B's host, tenant A's users find nothing.
 */
export function authenticate(deps: AuthDeps): MiddlewareHandler<AppEnv> {
  const originAllowed = browserOriginCheck(deps.config);
  const recordUse = apiKeyUseRecorder(deps);

  /** The caller once its session is known: the checks every credential passes, then the route. */
  const admit = (c: Context<AppEnv>, next: Next, found: OpenFound) => {
    const principal = admission(found, c.get("tenant")?.id, c.req.method, c.req.path);
    c.set("principal", principal);
    c.set("identity", found.identity);
    return next();
  };

  const byApiKey = async (c: Context<AppEnv>, next: Next, token: string) => {
    // platform administration knows no API keys: not even looked up there
    if (c.req.path.startsWith(ADMIN_AREA))
      throw unauthorized("API keys are not accepted on platform administration routes.");
    const key = await openApiKey(deps, token);
    if ("refused" in key) throw unauthorized(key.refused, { invalidToken: true });
    if (!c.req.path.startsWith(API_KEY_AREA))
      throw new AppError("forbidden", "API keys are accepted on tenant routes only (/api/tenant/).");
    const tenant = c.get("tenant");
    if (tenant && key.tenantId !== tenant.id) throw new AppError("not_found", "No such resource.");
    c.set("principal", { kind: "apiKey", ...key, roles: [], platformRoles: [] });
    recordUse(tenantCtxOf(c), key.keyId);
    return next();
  };

  const byToken = async (c: Context<AppEnv>, next: Next, token: string) => {
    const found = await openTokenSession(deps, token);
    if ("refused" in found) throw unauthorized(found.refused, { invalidToken: true });
    return admit(c, next, found);
  };

  const byCookie = async (c: Context<AppEnv>, next: Next) => {
    const cookie = readSessionCookie(c);
    if (!cookie) throw unauthorized();
    const origin = c.req.header("origin");
    if (origin !== undefined && !originAllowed(origin)) {
      throw new AppError("forbidden", "This origin may not use browser authentication.");
    }
    const found = await openBrowserSession(deps, cookie);
    if ("refused" in found) throw unauthorized(found.refused);
    if (!SAFE_METHODS.has(c.req.method) && !csrfTokenMatches(found, c.req.header(CSRF_HEADER))) {
      throw new AppError("forbidden", "Missing or wrong CSRF token.");
    }
    return admit(c, next, found);
  };

  // a plain function, not an async one: a bearer token this process has verified, whose session is
  // cached, is admitted without an await (each await is ~0.2–0.3 µs of an answer over HTTP,
  // docs/performance.md); anything else takes the lookups above, which decide as before
  return (c, next) => {
    const header = c.req.header("authorization");
    if (header === undefined) return byCookie(c, next);
    const token = bearerToken(header);
    if (isApiKeyShaped(token)) return byApiKey(c, next, token);
    const remembered = rememberedTokenSession(deps, token);
    if (remembered === undefined) return byToken(c, next, token);
    if ("refused" in remembered) throw unauthorized(remembered.refused, { invalidToken: true });
    return admit(c, next, remembered);
  };
}
