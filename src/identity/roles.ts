/**
 * The roles Plinth knows and what each may do. Tenant roles are stored per user
 * (`tenant_role_bindings`, see db/schema/identity.ts); platform roles are bound to platform staff.
 */
export { type TenantRole, tenantRoles } from "../db/schema/identity.ts";

/** The platform role that manages tenants, domains, providers, secrets and jobs. */
export const PLATFORM_ADMIN_ROLE = "platform_admin";

/** The read-only platform role: every admin read (API and console), no change (docs/roles.md). */
export const PLATFORM_VIEWER_ROLE = "platform_viewer";

export const platformRoleNames = [PLATFORM_ADMIN_ROLE, PLATFORM_VIEWER_ROLE] as const;
export type PlatformRole = (typeof platformRoleNames)[number];

/** Whether platform roles let their holder change things (only administrators may). */
export const mayChangePlatform = (platformRoles: readonly string[]): boolean =>
  platformRoles.includes(PLATFORM_ADMIN_ROLE);

/** Whether platform roles let their holder read what administrators read. */
export const mayReadPlatform = (platformRoles: readonly string[]): boolean =>
  platformRoles.some((role) => (platformRoleNames as readonly string[]).includes(role));
