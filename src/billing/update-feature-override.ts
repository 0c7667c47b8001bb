import { recordAudit } from "../audit/record.ts";
import { invalidate, tenantFeaturesKey } from "../cache/read-through.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { tenantFeatureOverrides } from "../db/schema/billing.ts";
import { getTenant } from "../tenancy/tenants.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { assertFeatureExists } from "./entitlements.ts";

export interface FeatureOverrideInput {
  featureKey: string;
  enabled: boolean;
  /** The most the tenant may use per period (metered features); null: unlimited. */
  limit: number | null;
  reason: string;
}

/**
 * Sets the ctx's tenant's override of one feature (it replaces the plan's entry), with its audit
 * entry, in one transaction; drops the cached features. 404 for an unknown tenant or feature.
 */
export async function updateFeatureOverride(
  deps: BillingDeps,
  ctx: TenantCtx,
  input: FeatureOverrideInput,
): Promise<void> {
  const { tenantId } = ctx;
  const { featureKey, ...override } = input;
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  await withDatabase(deps, ctx, (db) => assertFeatureExists(db, featureKey));
  const now = deps.clock.now();
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    await tx
      .insert(tenantFeatureOverrides)
      .values({ tenantId, featureKey, ...override, createdAt: now, updatedAt: now })
      .onConflictDoUpdate({
        target: [tenantFeatureOverrides.tenantId, tenantFeatureOverrides.featureKey],
        set: { ...override, updatedAt: now },
      });
    await recordAudit(tx, txCtx, {
      action: "feature.override",
      target: { type: "feature", id: featureKey },
      details: {
        feature: featureKey,
        value: override.enabled,
        count: override.limit,
        reason: override.reason,
      },
    });
  });
  await invalidate(deps.cache, [tenantFeaturesKey(tenantId)], { logger: deps.logger });
}
