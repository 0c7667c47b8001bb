import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Ctx, TenantCtx } from "../context.ts";
import { AppError, fieldErrors } from "../errors.ts";
import type { ResolvedTenant } from "../tenancy/tenant-lookup.ts";
import { clientIp } from "./client-ip.ts";
import { MemoRouter } from "./memo-router.ts";
import { HttpError } from "./problem-json.ts";
import { readTrustedDeviceCookie } from "./session-cookie.ts";

/**
 * Who is calling: set by the authentication middleware from a verified token, session cookie or
 * tenant API key.
 */
export type Principal = UserPrincipal | ApiKeyPrincipal;

/** A signed-in user (access token or browser session). */
export interface UserPrincipal {
  kind?: "user";
  userId: string;
  /** null for platform staff. */
  tenantId: string | null;
  /** Tenant roles (e.g. `owner`, `member`) in `tenantId`. */
  roles: string[];
  /** Platform roles (e.g. `platform_admin`). */
  platformRoles: string[];
  sessionId: string;
  /** An impersonated session: the platform admin acting as the user. */
  impersonatorId?: string;
}

/** A tenant API key: no user, no roles; its scopes decide (against the scope each route declares). */
export interface ApiKeyPrincipal {
  kind: "apiKey";
  keyId: string;
  tenantId: string;
  scopes: readonly string[];
  /** The tenant's subscription is suspended: the key reads only (docs/api-keys.md). */
  readOnly: boolean;
  roles: readonly string[];
  platformRoles: readonly string[];
}

export type { ResolvedTenant };

/** Per-request values set by middleware. Routes behind the auth guards can rely on `principal`. */
export type AppEnv = {
  /** What the server hands to `app.fetch(req, env)`: the socket peer (see http/client-ip.ts). */
  Bindings: {
    peerAddress?: string;
  };
  Variables: {
    requestId: string;
    /** An `X-Request-Id` the client sent that was not taken as the id (`requestIdOf`). */
    clientRequestId?: string;
    /** The real client IP, or `unknown`: read it with `clientIp(c)` (http/client-ip.ts). */
    clientIp?: string;
    /** Set by the `edge` middleware for `clientIp(c)`. */
    trustedProxies?: import("./client-ip.ts").TrustedProxies;
    principal?: Principal;
    /** The SCIM token a /scim/v2 request presented, once checked (src/http/routes/scim.ts). */
    scimToken?: { tokenId: string; tenantId: string };
    /** The caller's identity as loaded with the session (middleware/authenticate.ts). */
    identity?: import("../auth/user-identity.ts").Identity;
    tenant?: ResolvedTenant;
    /** The request's host name (no port), as the tenancy middleware resolved it. */
    host?: string;
  };
};

/** A router whose request validation fails as a 400 problem naming the fields. */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    // Hono's router with its answers remembered per method and path (http/memo-router.ts)
    router: new MemoRouter(),
    defaultHook: (result) => {
      if (!result.success) {
        throw new AppError("validation_failed", "The request is not valid.", {
          fields: fieldErrors(result.error),
        });
      }
    },
  });
}

export type Router = ReturnType<typeof createRouter>;

type RequestContext = Context<AppEnv>;

/**
 * 401 with the `WWW-Authenticate` challenge of RFC 6750 §3. A request that carried no credentials
 * gets the bare challenge (§3.1: no error code then); one whose bearer token was malformed, forged,
 * expired or speaks for an ended session names `error="invalid_token"` and describes why.
 */
export function unauthorized(
  detail = "Authentication required.",
  options: { invalidToken?: boolean } = {},
): HttpError {
  let challenge = 'Bearer realm="plinth"';
  // error_description allows printable ASCII without " and \ (RFC 6750 §3)
  if (options.invalidToken)
    challenge += `, error="invalid_token", error_description="${detail.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, "")}"`;
  return new HttpError("unauthorized", detail, { "www-authenticate": challenge });
}

/** The verified caller; 401 when the request carries none (the auth guard normally answers first). */
export function principalOf(c: RequestContext): Principal {
  const principal = c.get("principal");
  if (!principal) throw unauthorized();
  return principal;
}

/** The calling tenant user's tenant: 403 for a principal that belongs to no tenant. */
export function tenantIdOf(c: RequestContext): string {
  const { tenantId } = principalOf(c);
  if (!tenantId) throw new AppError("forbidden", "A tenant user is required.");
  return tenantId;
}

/** The ctx a domain function gets for this request: the caller, the tenant, the request id. */
export function ctxOf(c: RequestContext, tenantId: string | null = principalOf(c).tenantId): Ctx {
  const principal = principalOf(c);
  return {
    tenantId,
    actor:
      principal.kind === "apiKey"
        ? { type: "apiKey", keyId: principal.keyId, scopes: principal.scopes }
        : {
            type: "user",
            userId: principal.userId,
            sessionId: principal.sessionId,
            roles: principal.roles,
            platformRoles: principal.platformRoles,
            ...(principal.impersonatorId ? { impersonatorId: principal.impersonatorId } : {}),
          },
    requestId: c.get("requestId"),
    clientRequestId: c.get("clientRequestId"),
    clientIp: clientIp(c),
    userAgent: userAgentOf(c),
  };
}

/** The caller's `User-Agent`, cut at 512 characters; undefined when absent. */
const userAgentOf = (c: RequestContext): string | undefined =>
  c.req.header("user-agent")?.slice(0, 512) || undefined;

/** The ctx of a caller who is not signed in (sign-in, refresh), in the tenant the request resolved to. */
export function anonymousCtxOf(
  c: RequestContext,
  tenantId: string | null = c.get("tenant")?.id ?? null,
): Ctx {
  return {
    tenantId,
    actor: { type: "anonymous" },
    requestId: c.get("requestId"),
    clientRequestId: c.get("clientRequestId"),
    clientIp: clientIp(c),
    userAgent: userAgentOf(c),
    ...trustedDeviceOf(c),
  };
}

/** The trusted-device cookie a sign-in request carries (src/auth/trusted-devices.ts), where it has one. */
function trustedDeviceOf(c: RequestContext): { trustedDeviceCookie?: string } {
  const cookie = readTrustedDeviceCookie(c);
  return cookie ? { trustedDeviceCookie: cookie } : {};
}

/** The ctx of a tenant user acting in their own tenant (403 for platform staff). */
export function tenantCtxOf(c: RequestContext): TenantCtx {
  return { ...ctxOf(c), tenantId: tenantIdOf(c) };
}

/** The ctx of a platform administrator acting in `tenantId`, the tenant an admin route names. */
export function adminCtxOf(c: RequestContext, tenantId: string): TenantCtx {
  return { ...ctxOf(c, tenantId), tenantId };
}
