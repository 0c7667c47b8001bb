import { and, asc, eq, inArray, sql } from "drizzle-orm";
import { z } from "zod";
import type { Ctx } from "../context.ts";
import { type DatabaseDeps, withDatabase } from "../db/operation.ts";
import { type FeatureKind, features, planFeatures, plans, type UsagePeriod } from "../db/schema/billing.ts";
import { cursorCodec, type Page, type PageRequest } from "../pagination.ts";

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

/** A position in the catalog: the last plan's sort order and code (keyset). */
const planCursor = cursorCodec(z.object({ sortOrder: z.number().int(), code: z.string().min(1).max(100) }));

/** The public plans with their features, in catalog order, a page at a time. */
export async function listPlans(deps: DatabaseDeps, ctx: Ctx, input: PageRequest): Promise<Page<PlanView>> {
  const after = planCursor.decodeOptional(input.cursor);
  return withDatabase(deps, ctx, async (db) => {
    const fetched = await db
      .select()
      .from(plans)
      .where(
        and(
          eq(plans.public, true),
          after === undefined
            ? undefined
            : sql`(${plans.sortOrder}, ${plans.code}) > (${after.sortOrder}, ${after.code})`,
        ),
      )
      .orderBy(asc(plans.sortOrder), asc(plans.code))
      .limit(input.limit + 1);
    const rows = fetched.slice(0, input.limit);
    const last = rows.at(-1);
    const nextCursor =
      fetched.length > input.limit && last
        ? planCursor.encode({ sortOrder: last.sortOrder, code: last.code })
        : null;
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
    return { items, nextCursor };
  });
}
