/**
 * The roles Plinth knows and what each may do. Tenant roles are stored per user
 * (`tenant_role_bindings`, see db/schema/identity.ts); platform roles are bound to platform staff.
 */
export { type TenantRole, tenantRoles } from "../db/schema/identity.ts";

/** The platform role that manages tenants, domains, providers, secrets and jobs. */
export const PLATFORM_ADMIN_ROLE = "platform_admin";
