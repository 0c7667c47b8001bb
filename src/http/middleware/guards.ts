import type { MiddlewareHandler } from "hono";
import { scopesGrant } from "../../api-keys/scopes.ts";
import { AppError } from "../../errors.ts";
import { mayChangePlatform, mayReadPlatform } from "../../identity/roles.ts";
import { type Access, declareGuard, type TenantAccess } from "../access.ts";
import { type AppEnv, principalOf } from "../request-context.ts";

/**
 * The guard of one route, made from the access its declaration names (`apiRoute(access, …)`): the
 * route's own middleware, so it runs after `authenticate` (mounted once per area in app.ts) and
 * before the request is validated. Route modules add no guards of their own.
 */
export function guardOf(access: Access): MiddlewareHandler<AppEnv> {
  return declareGuard(checkOf(access), access);
}

const READS = new Set(["GET", "HEAD", "OPTIONS"]);

// plain functions returning the next step, not async ones: an await is ~0.2–0.3 µs of an answer over
// HTTP (docs/performance.md), and a guard has nothing to do after the route
function checkOf(access: Access): MiddlewareHandler<AppEnv> {
  switch (access) {
    case "public":
    case "probe":
      return (_, next) => next();
    case "signedIn":
      return (c, next) => {
        principalOf(c);
        return next();
      };
    case "platform":
      return platformStaff;
    default:
      return tenantCaller(access);
  }
}

/**
 * Platform staff only. They act across tenants only through these routes: administrators with
 * every method, viewers (`platform_viewer`) only reading (GET, HEAD); anything else is 403.
 */
const platformStaff: MiddlewareHandler<AppEnv> = (c, next) => {
  const { platformRoles } = principalOf(c);
  if (!mayChangePlatform(platformRoles)) {
    if (!mayReadPlatform(platformRoles)) throw new AppError("forbidden", "Platform administrators only.");
    if (!READS.has(c.req.method))
      throw new AppError("forbidden", "The platform_viewer role reads; it changes nothing.");
  }
  return next();
};

/**
 * A tenant's own users holding one of the declared roles; or a tenant API key whose scopes grant the
 * declared one (a key has no role: its scopes stand for it, docs/api-keys.md).
 */
function tenantCaller({ tenant: roles, apiKey }: TenantAccess): MiddlewareHandler<AppEnv> {
  return (c, next) => {
    const principal = principalOf(c);
    if (principal.kind === "apiKey") {
      if (apiKey === "none") throw new AppError("forbidden", "API keys cannot make this request.");
      if (apiKey !== "any" && !scopesGrant(principal.scopes, apiKey))
        throw new AppError(
          "forbidden",
          `This API key's scopes do not allow this request (it needs "${apiKey}").`,
        );
      if (principal.readOnly && !READS.has(c.req.method))
        throw new AppError("forbidden", "The tenant's subscription is suspended: its API keys only read.");
      return next();
    }
    if (!principal.tenantId) throw new AppError("forbidden", "Tenant users only.");
    if (roles !== "everyone" && !principal.roles.some((role) => (roles as readonly string[]).includes(role)))
      throw new AppError("forbidden", `Requires one of: ${roles.join(", ")}.`);
    return next();
  };
}
