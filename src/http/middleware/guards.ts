import type { MiddlewareHandler } from "hono";
import { scopesAllow } from "../../api-keys/scopes.ts";
import { AppError } from "../../errors.ts";
import { mayChangePlatform, mayReadPlatform, type TenantRole } from "../../identity/roles.ts";
import { type AppEnv, principalOf } from "../context.ts";

/**
 * The role guards, each mounted once in app.ts where `/api/admin/*` and `/api/tenant/*` are
 * mounted (after `authenticate`); route modules add none of their own.
 */

const READS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Platform staff only. They act across tenants only through these routes: administrators with
 * every method, viewers (`platform_viewer`) only reading (GET, HEAD); anything else is 403.
 */
export function requirePlatformAdmin(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const { platformRoles } = principalOf(c);
    if (!mayChangePlatform(platformRoles)) {
      if (!mayReadPlatform(platformRoles)) throw new AppError("forbidden", "Platform administrators only.");
      if (!READS.has(c.req.method))
        throw new AppError("forbidden", "The platform_viewer role reads; it changes nothing.");
    }
    await next();
  };
}

/**
 * A tenant's own users, optionally with one of `roles`; or a tenant API key whose scopes allow the
 * request (src/api-keys/scopes.ts: a key has no role, its scopes stand for the role matrix).
 */
export function requireTenantUser(roles?: readonly TenantRole[]): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const principal = principalOf(c);
    if (principal.kind === "apiKey") {
      const verdict = scopesAllow(principal.scopes, c.req.method, c.req.path);
      if (!verdict.allowed)
        throw new AppError(
          "forbidden",
          verdict.needs
            ? `This API key's scopes do not allow this request (it needs "${verdict.needs}").`
            : "API keys cannot make this request.",
        );
      return next();
    }
    if (!principal.tenantId) throw new AppError("forbidden", "Tenant users only.");
    if (roles && !principal.roles.some((role) => (roles as readonly string[]).includes(role))) {
      throw new AppError("forbidden", `Requires one of: ${roles.join(", ")}.`);
    }
    await next();
  };
}
