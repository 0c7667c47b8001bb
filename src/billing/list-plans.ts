import { asc, eq, inArray } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import { type DatabaseDeps, withDatabase } from "../db/operation.ts";
import { type FeatureKind, features, planFeatures, plans, type UsagePeriod } from "../db/schema/billing.ts";
import type { Page } from "../pagination.ts";

export interface PlanView {
  code: string;
  name: string;
  description: string;
  priceCents: number;
  currency: string;
  features: {
    key: string;
    name: string;
    kind: FeatureKind;
    unit: string;
    period: UsagePeriod;
    enabled: boolean;
    limit: number | null;
  }[];
}

/** The public plans with their features, in catalog order: one page, the catalog is small. */
export async function listPlans(deps: DatabaseDeps, ctx: Ctx): Promise<Page<PlanView>> {
  return withDatabase(deps, ctx, async (db) => {
    const rows = await db
      .select()
      .from(plans)
      .where(eq(plans.public, true))
      .orderBy(asc(plans.sortOrder), asc(plans.code));
    if (rows.length === 0) return { items: [], nextCursor: null };
    const entries = await db
      .select({
        planCode: planFeatures.planCode,
        key: features.key,
        name: features.name,
        kind: features.kind,
        unit: features.unit,
        period: features.period,
        enabled: planFeatures.enabled,
        limit: planFeatures.limit,
      })
      .from(planFeatures)
      .innerJoin(features, eq(features.key, planFeatures.featureKey))
      .where(
        inArray(
          planFeatures.planCode,
          rows.map((r) => r.code),
        ),
      )
      .orderBy(asc(features.key));
    const items = rows.map((plan) => ({
      code: plan.code,
      name: plan.name,
      description: plan.description,
      priceCents: plan.priceCents,
      currency: plan.currency,
      features: entries.filter((e) => e.planCode === plan.code).map(({ planCode: _, ...e }) => e),
    }));
    return { items, nextCursor: null };
  });
}
