import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

/** `rate`: a limit per window (the request rate), never counted in the usage ledger. */
export const featureKinds = ["boolean", "metered", "rate"] as const;
export type FeatureKind = (typeof featureKinds)[number];
/** How a metered feature's usage resets: every calendar month (UTC) or never (a running total). */
export const usagePeriods = ["month", "never"] as const;
export type UsagePeriod = (typeof usagePeriods)[number];

export const subscriptionStatuses = ["trialing", "active", "past_due", "suspended", "canceled"] as const;
export type SubscriptionStatus = (typeof subscriptionStatuses)[number];

/** The built-in feature catalog (seeded by the migrator). */
export const features = pgTable(
  "features",
  {
    key: text().primaryKey(),
    name: text().notNull().default(""),
    description: text().notNull().default(""),
    kind: text({ enum: featureKinds }).notNull().default("boolean"),
    /** Unit of a metered feature (`calls`, `bytes`, `domains`); empty for boolean ones. */
    unit: text().notNull().default(""),
    period: text({ enum: usagePeriods }).notNull().default("never"),
    ...timestamps,
  },
  () => [
    check("features_kind_check", sql`kind in ('boolean', 'metered', 'rate')`),
    check("features_period_check", sql`period in ('month', 'never')`),
  ],
);

/** Plans; `system` plans (the suspended set) are never assigned to a subscription. */
export const plans = pgTable("plans", {
  code: text().primaryKey(),
  name: text().notNull().default(""),
  description: text().notNull().default(""),
  /** Price per billing interval in the currency's minor unit; the payment provider charges it. */
  priceCents: integer().notNull().default(0),
  currency: text().notNull().default("USD"),
  /** Shown in the public catalog. */
  public: boolean().notNull().default(true),
  system: boolean().notNull().default(false),
  /** The plan of a tenant without a subscription (or with a canceled one). */
  isDefault: boolean().notNull().default(false),
  sortOrder: integer().notNull().default(0),
  ...timestamps,
});

/** What a plan includes: a feature on or off and, for metered features, a limit (null: unlimited). */
export const planFeatures = pgTable(
  "plan_features",
  {
    planCode: text()
      .notNull()
      .references(() => plans.code, { onDelete: "cascade", onUpdate: "cascade" }),
    featureKey: text()
      .notNull()
      .references(() => features.key, { onDelete: "cascade", onUpdate: "cascade" }),
    enabled: boolean().notNull().default(true),
    limit: bigint({ mode: "number" }),
    ...timestamps,
  },
  (t) => [primaryKey({ columns: [t.planCode, t.featureKey] })],
);

/** A tenant's own entry for one feature; it replaces the plan's entry (not while suspended). */
export const tenantFeatureOverrides = pgTable(
  "tenant_feature_overrides",
  {
    tenantId: tenantIdColumn(),
    featureKey: text()
      .notNull()
      .references(() => features.key, { onDelete: "cascade", onUpdate: "cascade" }),
    enabled: boolean().notNull().default(true),
    limit: bigint({ mode: "number" }),
    reason: text().notNull().default(""),
    ...timestamps,
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.featureKey] }), tenantIsolation()],
);

/** The one current subscription of a tenant (a canceled one stays, and may be reactivated). */
export const subscriptions = pgTable(
  "subscriptions",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    planCode: text()
      .notNull()
      .default("free")
      .references(() => plans.code, { onUpdate: "cascade" }),
    status: text({ enum: subscriptionStatuses }).notNull().default("active"),
    currentPeriodStart: timestamp({ withTimezone: true }).notNull().defaultNow(),
    /** End of the paid (or trial) period; null for a plan that is never billed (free). */
    currentPeriodEnd: timestamp({ withTimezone: true }),
    pastDueSince: timestamp({ withTimezone: true }),
    suspendedAt: timestamp({ withTimezone: true }),
    canceledAt: timestamp({ withTimezone: true }),
    /** The payment provider's id for this subscription, when it has one. */
    externalRef: text(),
    version: integer().notNull().default(1),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("subscriptions_tenant_idx").on(t.tenantId),
    check(
      "subscriptions_status_check",
      sql`${t.status} in ('trialing', 'active', 'past_due', 'suspended', 'canceled')`,
    ),
    // the loop's two claims: periods that ended, and past-due ones whose grace may have run out
    index("subscriptions_period_end_idx")
      .on(t.currentPeriodEnd)
      .where(sql`${t.status} in ('trialing', 'active')`),
    index("subscriptions_past_due_idx").on(t.pastDueSince).where(sql`${t.status} = 'past_due'`),
    tenantIsolation(),
  ],
);

/** Every change of a subscription, in order; the provider's event id makes webhook deliveries idempotent. */
export const subscriptionHistory = pgTable(
  "subscription_history",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    tenantId: tenantIdColumn(),
    subscriptionId: uuid()
      .notNull()
      .references(() => subscriptions.id, { onDelete: "cascade" }),
    event: text().notNull().default(""),
    /** null when the event created the subscription. */
    fromStatus: text(),
    toStatus: text().notNull().default("active"),
    fromPlan: text(),
    toPlan: text().notNull().default("free"),
    /** `admin`, `webhook` or `loop`. */
    source: text().notNull().default("admin"),
    /** The user who made an admin change. */
    actorId: uuid(),
    externalEventId: text(),
    reason: text().notNull().default(""),
    occurredAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index("subscription_history_tenant_idx").on(t.tenantId, t.id),
    uniqueIndex("subscription_history_external_event_idx")
      .on(t.tenantId, t.externalEventId)
      .where(sql`${t.externalEventId} is not null`),
    tenantIsolation(),
  ],
);

/**
 * What a usage row counts: a tenant's use of a feature in the period starting at `periodStart` (the
 * epoch for features that never reset).
 */
const usageKeyColumns = () => ({
  tenantId: tenantIdColumn(),
  featureKey: text()
    .notNull()
    .references(() => features.key, { onUpdate: "cascade" }),
  periodStart: timestamp({ withTimezone: true }).notNull().default(sql`'1970-01-01T00:00:00Z'`),
});

/** The usage ledger: append-only, the truth cache counters are reconciled against. */
export const usageEvents = pgTable(
  "usage_events",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    ...usageKeyColumns(),
    quantity: bigint({ mode: "number" }).notNull().default(1),
    idempotencyKey: text().notNull(),
    occurredAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("usage_events_idempotency_idx").on(t.tenantId, t.idempotencyKey),
    index("usage_events_total_idx").on(t.tenantId, t.featureKey, t.periodStart),
    tenantIsolation(),
  ],
);

/**
 * One row per tenant × feature × period that has usage: what the reconciliation loop claims (with a
 * lease) and where it notes the ledger total it last saw.
 */
export const usageCounters = pgTable(
  "usage_counters",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    ...usageKeyColumns(),
    /** null for features that never reset. */
    periodEnd: timestamp({ withTimezone: true }),
    ledgerTotal: bigint({ mode: "number" }).notNull().default(0),
    reconciledAt: timestamp({ withTimezone: true }),
    lockedBy: text(),
    lockedUntil: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("usage_counters_key_idx").on(t.tenantId, t.featureKey, t.periodStart),
    index("usage_counters_due_idx").on(t.reconciledAt),
    tenantIsolation(),
  ],
);

/** What a reconciliation pass corrected: the cache held `cachedBefore` (null: missing), the ledger said `ledgerTotal`. */
export const usageReconciliations = pgTable(
  "usage_reconciliations",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    tenantId: tenantIdColumn(),
    featureKey: text().notNull().default(""),
    periodStart: timestamp({ withTimezone: true }).notNull().default(sql`'1970-01-01T00:00:00Z'`),
    ledgerTotal: bigint({ mode: "number" }).notNull().default(0),
    cachedBefore: bigint({ mode: "number" }),
    /** cachedBefore − ledgerTotal (null when the counter was missing). */
    drift: bigint({ mode: "number" }),
    /** `missing` or `drift`. */
    reason: text().notNull().default("drift"),
    correctedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("usage_reconciliations_tenant_idx").on(t.tenantId, t.id), tenantIsolation()],
);
