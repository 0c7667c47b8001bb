import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { getTenant } from "../tenancy/tenants.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { findSubscription, type Subscription } from "./subscription-row.ts";

/** The ctx's tenant's subscription (null: none yet, the default plan applies); 404 for an unknown tenant. */
export async function getSubscription(
  deps: Pick<BillingDeps, "database">,
  ctx: TenantCtx,
): Promise<Subscription | null> {
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  return withDatabase(deps, ctx, (db) => findSubscription(db, ctx.tenantId));
}
