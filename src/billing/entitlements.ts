import { and, asc, eq } from "drizzle-orm";
import { cached, tenantFeaturesKey } from "../cache/read-through.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { withDatabase } from "../db/operation.ts";
import {
  type FeatureKind,
  features,
  planFeatures,
  plans,
  tenantFeatureOverrides,
  type UsagePeriod,
} from "../db/schema/billing.ts";
import { AppError } from "../errors.ts";
import { getCurrentUsage } from "../usage/current-usage.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { DEFAULT_PLAN, SUSPENDED_PLAN } from "./catalog.ts";
import { findSubscription } from "./subscription-row.ts";
import type { SubscriptionState } from "./subscription-states.ts";

export interface FeatureEntitlement {
  key: string;
  kind: FeatureKind;
  unit: string;
  period: UsagePeriod;
  enabled: boolean;
  /**
   * For metered features: the most the tenant may use per period; for rate features, per window
   * (`rate_limit_per_minute`: requests per minute); null: unlimited.
   */
  limit: number | null;
  /** Where the entry came from: the plan, the tenant's override, or the suspended set. */
  source: "plan" | "override" | "suspended";
}

export interface TenantFeatures {
  tenantId: string;
  /** The plan whose features apply (`suspended` for a suspended tenant). */
  plan: string;
  status: SubscriptionState;
  features: Record<string, FeatureEntitlement>;
}

async function defaultPlan(db: Executor): Promise<string> {
  const [row] = await db
    .select({ code: plans.code })
    .from(plans)
    .where(and(eq(plans.isDefault, true), eq(plans.system, false)))
    .orderBy(asc(plans.sortOrder))
    .limit(1);
  return row?.code ?? DEFAULT_PLAN;
}

/**
 * A tenant's effective features from the database: its plan's entries with the tenant's overrides
 * on top. No subscription or a canceled one: the default plan. Suspended: the suspended set, and
 * overrides do not apply. Every catalog feature is listed (off when the plan does not include it).
 */
export async function loadTenantFeatures(db: Executor, tenantId: string): Promise<TenantFeatures> {
  const subscription = await findSubscription(db, tenantId);
  const status: SubscriptionState = subscription?.status ?? "none";
  const suspended = status === "suspended";
  const plan = suspended
    ? SUSPENDED_PLAN
    : !subscription || status === "canceled"
      ? await defaultPlan(db)
      : subscription.planCode;
  const rows = await db
    .select({
      key: features.key,
      kind: features.kind,
      unit: features.unit,
      period: features.period,
      enabled: planFeatures.enabled,
      limit: planFeatures.limit,
    })
    .from(features)
    .leftJoin(planFeatures, and(eq(planFeatures.featureKey, features.key), eq(planFeatures.planCode, plan)))
    .orderBy(asc(features.key));
  const out: Record<string, FeatureEntitlement> = {};
  for (const row of rows)
    out[row.key] = {
      key: row.key,
      kind: row.kind,
      unit: row.unit,
      period: row.period,
      enabled: row.enabled ?? false,
      limit: row.kind === "boolean" ? null : (row.limit ?? null),
      source: suspended ? "suspended" : "plan",
    };
  if (!suspended) {
    const overrides = await db
      .select()
      .from(tenantFeatureOverrides)
      .where(eq(tenantFeatureOverrides.tenantId, tenantId));
    for (const override of overrides) {
      const base = out[override.featureKey];
      if (!base) continue;
      out[override.featureKey] = {
        ...base,
        enabled: override.enabled,
        limit: base.kind === "boolean" ? null : override.limit,
        source: "override",
      };
    }
  }
  return { tenantId, plan, status, features: out };
}

/** 404 unless the feature is in the catalog. */
export async function assertFeatureExists(db: Executor, featureKey: string): Promise<void> {
  const [feature] = await db.select({ key: features.key }).from(features).where(eq(features.key, featureKey));
  if (!feature) throw new AppError("not_found", "No such feature.");
}

/**
 * The tenant's effective features, read through the cache for `Cache:TenantFeaturesSeconds` (for
 * the checks other operations make; `getTenantFeatures` is the operation that answers them).
 */
export async function cachedTenantFeatures(deps: BillingDeps, ctx: TenantCtx): Promise<TenantFeatures> {
  return cached(
    deps.cache,
    tenantFeaturesKey(ctx.tenantId),
    deps.config.settings.Cache.TenantFeaturesSeconds,
    () => withDatabase(deps, ctx, (db) => loadTenantFeatures(db, ctx.tenantId)),
    { logger: deps.logger },
  );
}

/**
 * Throws unless the ctx's tenant may use `quantity` (default 1) more of a feature now:
 * - 402 `payment_required`: the feature is off for the tenant (not in its plan, or suspended);
 * - 403 `usage_limit_reached`: a metered feature whose period usage plus `quantity` exceeds the limit.
 * Limits are checked against the fast cached counter (rebuilt from the ledger when missing); the
 * check and the later `recordUsage` are not one atomic step, so concurrent requests may overshoot
 * a limit by at most their number.
 */
export async function assertFeature(
  deps: BillingDeps,
  ctx: TenantCtx,
  input: { feature: string; quantity?: number },
): Promise<FeatureEntitlement> {
  const { feature: featureKey, quantity = 1 } = input;
  const { features: entitlements } = await cachedTenantFeatures(deps, ctx);
  const feature = entitlements[featureKey];
  if (!feature?.enabled)
    throw new AppError("payment_required", `The tenant's plan does not include "${featureKey}".`);
  if (feature.kind === "metered" && feature.limit !== null) {
    const used = await getCurrentUsage(deps, ctx, { feature: featureKey, period: feature.period });
    if (used + quantity > feature.limit)
      throw new AppError(
        "usage_limit_reached",
        `The ${feature.period === "month" ? "monthly " : ""}limit of "${featureKey}" (${feature.limit} ${feature.unit}) is reached.`,
      );
  }
  return feature;
}
