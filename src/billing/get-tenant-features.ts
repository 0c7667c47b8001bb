import type { TenantCtx } from "../context.ts";
import { getTenant } from "../tenancy/tenants.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { cachedTenantFeatures, type TenantFeatures } from "./entitlements.ts";

/** The ctx's tenant's effective features, for its users or a platform admin; 404 for an unknown tenant. */
export async function getTenantFeatures(deps: BillingDeps, ctx: TenantCtx): Promise<TenantFeatures> {
  // a tenant user's own tenant exists (their session was opened through it); a tenant an admin
  // names may not (404), so only then is it looked up
  const ownTenant = ctx.actor.type === "user" && ctx.actor.platformRoles.length === 0;
  if (!ownTenant) await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  return cachedTenantFeatures(deps, ctx);
}
