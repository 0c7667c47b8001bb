import type { MiddlewareHandler } from "hono";
import { AppError } from "../errors.ts";
import { PLATFORM_ADMIN_ROLE } from "../identity/roles.ts";
import type { AppEnv, Principal } from "./context.ts";

/**
 * Defence in depth for route modules that the auth guards mount: refuse when no principal was
 * set (401) or it lacks the platform administrator role (403), whatever is mounted in front.
 */
export function platformAdminOnly(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const principal = c.get("principal");
    if (!principal) throw new AppError("unauthorized");
    if (!principal.platformRoles.includes(PLATFORM_ADMIN_ROLE))
      throw new AppError("forbidden", "Platform administrators only.");
    await next();
  };
}

/** The calling tenant user: 401 without a principal, 403 for a principal that belongs to no tenant. */
export function tenantPrincipal(principal: Principal | undefined): Principal & { tenantId: string } {
  if (!principal) throw new AppError("unauthorized");
  if (!principal.tenantId) throw new AppError("forbidden", "A tenant user is required.");
  return principal as Principal & { tenantId: string };
}
