import { and, eq, notInArray, sql } from "drizzle-orm";
import type { Tx } from "../db/client.ts";
import { type FeatureKind, features, planFeatures, plans, type UsagePeriod } from "../db/schema/billing.ts";

export interface FeatureDefinition {
  key: string;
  name: string;
  description: string;
  kind: FeatureKind;
  unit: string;
  period: UsagePeriod;
  /** Who counts it: Plinth itself, or the application built on it (`recordUsage`); default Plinth. */
  recordedBy?: "plinth" | "application";
}

export interface PlanDefinition {
  code: string;
  name: string;
  description: string;
  priceCents: number;
  currency: string;
  public: boolean;
  system: boolean;
  isDefault: boolean;
  sortOrder: number;
  /** Feature key → on/off and limit (null: unlimited). Features not listed are off. */
  features: Record<string, { enabled: boolean; limit: number | null }>;
}

const GiB = 1024 ** 3;

/** The built-in features. Metered features count usage in the ledger; boolean ones are on or off. */
export const builtInFeatures: FeatureDefinition[] = [
  {
    key: "api_calls",
    name: "API calls",
    description:
      "Requests to the tenant API (`/api/tenant/*`), per calendar month (UTC), counted by Plinth; over the limit, 403.",
    kind: "metered",
    unit: "calls",
    period: "month",
  },
  {
    key: "storage_bytes",
    name: "Storage",
    description: "Bytes of object storage in use (uploads add, deletions subtract).",
    kind: "metered",
    unit: "bytes",
    period: "never",
  },
  {
    key: "custom_domains",
    name: "Custom domains",
    description: "Custom domains the tenant may attach.",
    kind: "metered",
    unit: "domains",
    period: "never",
  },
  {
    key: "api_keys",
    name: "API keys",
    description: "Tenant API keys not revoked (an expired key counts until it is revoked).",
    kind: "metered",
    unit: "keys",
    period: "never",
  },
  {
    key: "webhook_endpoints",
    name: "Webhook endpoints",
    description: "Outgoing webhook endpoints the tenant may register.",
    kind: "metered",
    unit: "endpoints",
    period: "never",
  },
  {
    key: "seats",
    name: "Seats",
    description:
      "People in the tenant: its members plus its pending, unexpired invitations (counted live when inviting, not in the usage ledger).",
    kind: "metered",
    unit: "seats",
    period: "never",
  },
  {
    key: "rate_limit_per_minute",
    name: "Request rate",
    description:
      "Requests per minute to the tenant API (`/api/tenant/*`), all the tenant's users and keys together; over it, 429.",
    kind: "rate",
    unit: "requests/minute",
    period: "never",
  },
  {
    key: "sso",
    name: "Single sign-on",
    description: "Sign-in through the tenant's own identity provider.",
    kind: "boolean",
    unit: "",
    period: "never",
  },
];

export const SUSPENDED_PLAN = "suspended";
export const DEFAULT_PLAN = "free";

const on = (limit: number | null = null) => ({ enabled: true, limit });
const off = { enabled: false, limit: null };

/** Built-in plans; `suspended` is the feature set of a suspended tenant (a system plan, never assigned). */
export const builtInPlans: PlanDefinition[] = [
  {
    code: "free",
    name: "Free",
    description: "For trying Plinth out.",
    priceCents: 0,
    currency: "USD",
    public: true,
    system: false,
    isDefault: true,
    sortOrder: 10,
    features: {
      api_calls: on(10_000),
      rate_limit_per_minute: on(600),
      storage_bytes: on(GiB),
      custom_domains: off,
      api_keys: on(2),
      webhook_endpoints: on(2),
      seats: on(10),
      sso: off,
    },
  },
  {
    code: "pro",
    name: "Pro",
    description: "For teams in production.",
    priceCents: 4_900,
    currency: "USD",
    public: true,
    system: false,
    isDefault: false,
    sortOrder: 20,
    features: {
      api_calls: on(1_000_000),
      rate_limit_per_minute: on(6_000),
      storage_bytes: on(100 * GiB),
      custom_domains: on(5),
      api_keys: on(25),
      webhook_endpoints: on(10),
      seats: on(50),
      sso: off,
    },
  },
  {
    code: "enterprise",
    name: "Enterprise",
    description: "Unlimited API calls, single sign-on and many domains.",
    priceCents: 49_900,
    currency: "USD",
    public: true,
    system: false,
    isDefault: false,
    sortOrder: 30,
    features: {
      api_calls: on(null),
      rate_limit_per_minute: on(60_000),
      storage_bytes: on(1024 * GiB),
      custom_domains: on(100),
      api_keys: on(500),
      webhook_endpoints: on(50),
      seats: on(),
      sso: on(),
    },
  },
  {
    code: SUSPENDED_PLAN,
    name: "Suspended",
    description: "What a suspended tenant keeps: its stored data, nothing that adds usage.",
    priceCents: 0,
    currency: "USD",
    public: false,
    system: true,
    isDefault: false,
    sortOrder: 100,
    // storage stays on with a zero limit: data is kept, nothing new is stored
    features: {
      api_calls: off,
      rate_limit_per_minute: on(60),
      storage_bytes: on(0),
      custom_domains: off,
      api_keys: off,
      webhook_endpoints: off,
      seats: off,
      sso: off,
    },
  },
];

/**
 * Upserts the built-in catalog: new rows are added, changed ones updated, and a built-in plan's
 * features not listed any more are removed. Idempotent. Plans or features an operator added
 * outside the catalog are left alone.
 */
export async function seedBillingCatalog(
  tx: Tx,
  catalog: { features: FeatureDefinition[]; plans: PlanDefinition[] } = {
    features: builtInFeatures,
    plans: builtInPlans,
  },
): Promise<void> {
  const now = sql`now()`;
  await tx
    .insert(features)
    .values(catalog.features)
    .onConflictDoUpdate({
      target: features.key,
      set: {
        name: sql`excluded.name`,
        description: sql`excluded.description`,
        kind: sql`excluded.kind`,
        unit: sql`excluded.unit`,
        period: sql`excluded.period`,
        updatedAt: now,
      },
      setWhere: sql`(features.name, features.description, features.kind, features.unit, features.period)
        is distinct from (excluded.name, excluded.description, excluded.kind, excluded.unit, excluded.period)`,
    });
  await tx
    .insert(plans)
    .values(catalog.plans.map(({ features: _, ...plan }) => plan))
    .onConflictDoUpdate({
      target: plans.code,
      set: {
        name: sql`excluded.name`,
        description: sql`excluded.description`,
        priceCents: sql`excluded.price_cents`,
        currency: sql`excluded.currency`,
        public: sql`excluded.public`,
        system: sql`excluded.system`,
        isDefault: sql`excluded.is_default`,
        sortOrder: sql`excluded.sort_order`,
        updatedAt: now,
      },
    });
  const rows = catalog.plans.flatMap((plan) =>
    Object.entries(plan.features).map(([featureKey, entry]) => ({
      planCode: plan.code,
      featureKey,
      enabled: entry.enabled,
      limit: entry.limit,
    })),
  );
  if (rows.length > 0)
    await tx
      .insert(planFeatures)
      .values(rows)
      .onConflictDoUpdate({
        target: [planFeatures.planCode, planFeatures.featureKey],
        set: { enabled: sql`excluded.enabled`, limit: sql`excluded."limit"`, updatedAt: now },
        setWhere: sql`(plan_features.enabled, plan_features."limit") is distinct from (excluded.enabled, excluded."limit")`,
      });
  for (const plan of catalog.plans) {
    const keys = Object.keys(plan.features);
    await tx
      .delete(planFeatures)
      .where(
        and(
          eq(planFeatures.planCode, plan.code),
          keys.length > 0 ? notInArray(planFeatures.featureKey, keys) : undefined,
        ),
      );
  }
}
