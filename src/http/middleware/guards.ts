import type { MiddlewareHandler } from "hono";
import { AppError } from "../../errors.ts";
import { PLATFORM_ADMIN_ROLE, type TenantRole } from "../../identity/roles.ts";
import { type AppEnv, principalOf } from "../context.ts";

/**
 * The role guards, each mounted once in app.ts where `/api/admin/*` and `/api/tenant/*` are
 * mounted (after `authenticate`); route modules add none of their own.
 */

/** Platform administrators only. They act across tenants only through these routes. */
export function requirePlatformAdmin(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (!principalOf(c).platformRoles.includes(PLATFORM_ADMIN_ROLE)) {
      throw new AppError("forbidden", "Platform administrators only.");
    }
    await next();
  };
}

/** A tenant's own users, optionally with one of `roles`. */
export function requireTenantUser(roles?: readonly TenantRole[]): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const principal = principalOf(c);
    if (!principal.tenantId) throw new AppError("forbidden", "Tenant users only.");
    if (roles && !principal.roles.some((role) => (roles as readonly string[]).includes(role))) {
      throw new AppError("forbidden", `Requires one of: ${roles.join(", ")}.`);
    }
    await next();
  };
}
