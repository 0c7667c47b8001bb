import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { invalidate, tenantFeaturesKey } from "../cache/read-through.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { tenantFeatureOverrides } from "../db/schema/billing.ts";
import { AppError } from "../errors.ts";
import { getTenant } from "../tenancy/tenants.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { assertFeatureExists } from "./entitlements.ts";

/**
 * Removes the ctx's tenant's override of one feature (the plan's entry applies again), with its
 * audit entry, in one transaction; drops the cached features. 404 when there is none.
 */
export async function deleteFeatureOverride(
  deps: BillingDeps,
  ctx: TenantCtx,
  input: { featureKey: string },
): Promise<void> {
  const { tenantId } = ctx;
  const { featureKey } = input;
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  await withDatabase(deps, ctx, (db) => assertFeatureExists(db, featureKey));
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    const deleted = await tx
      .delete(tenantFeatureOverrides)
      .where(
        and(eq(tenantFeatureOverrides.tenantId, tenantId), eq(tenantFeatureOverrides.featureKey, featureKey)),
      )
      .returning({ key: tenantFeatureOverrides.featureKey });
    if (deleted.length === 0) throw new AppError("not_found", "The tenant has no override of this feature.");
    await recordAudit(tx, txCtx, {
      action: "feature.override",
      target: { type: "feature", id: featureKey },
      details: { feature: featureKey, status: "removed" },
    });
  });
  await invalidate(deps.cache, [tenantFeaturesKey(tenantId)], { logger: deps.logger });
}
