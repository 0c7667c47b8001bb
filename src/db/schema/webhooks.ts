import { sql } from "drizzle-orm";
import {
  bigserial,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  unique,
  uuid,
} from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { parentIsolation, tenantIdColumn, tenantIsolation } from "./tenants.ts";

/**
 * A tenant's webhook destination. Its signing secrets are tenant secrets (`tenant_secrets`, names
 * `webhooks.<id>.current` and `webhooks.<id>.previous`), so `bun run secrets:rotate` re-encrypts them.
 */
export const webhookEndpoints = pgTable(
  "webhook_endpoints",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    url: text().notNull(),
    description: text().notNull().default(""),
    /** Event types delivered here; `*` for every type. */
    events: text().array().notNull().default(sql`'{}'::text[]`),
    enabled: boolean().notNull().default(true),
    /** Why Plinth disabled it (`Webhooks:DisableAfterDays` of failures); null when enabled or disabled by the tenant. */
    disabledReason: text(),
    disabledAt: timestamp({ withTimezone: true }),
    /** Start of the current run of failed attempts; null after a success. */
    failingSince: timestamp({ withTimezone: true }),
    /** Until when the previous secret still signs beside the current one (rotation overlap). */
    previousSecretExpiresAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [index("webhook_endpoints_tenant_idx").on(t.tenantId, t.createdAt), tenantIsolation()],
);

/** The outbox: one row per event, written in the transaction of the change that caused it. */
export const webhookEvents = pgTable(
  "webhook_events",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    type: text().notNull(),
    data: jsonb().notNull().default({}),
    occurredAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("webhook_events_tenant_idx").on(t.tenantId, t.occurredAt), tenantIsolation()],
);

export const webhookDeliveryStatuses = ["pending", "succeeded", "failed"] as const;
export type WebhookDeliveryStatus = (typeof webhookDeliveryStatuses)[number];

/** One event to one endpoint: its attempts run as jobs (`webhooks.deliver`). */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    endpointId: uuid()
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: "cascade" }),
    eventId: uuid()
      .notNull()
      .references(() => webhookEvents.id, { onDelete: "cascade" }),
    status: text({ enum: webhookDeliveryStatuses }).notNull().default("pending"),
    /** Attempts made so far. */
    attempts: integer().notNull().default(0),
    lastStatusCode: integer(),
    lastErrorClass: text(),
    /** When the next attempt is due; null once succeeded or given up. */
    nextAttemptAt: timestamp({ withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    index("webhook_deliveries_endpoint_idx").on(t.endpointId, t.createdAt, t.id),
    index("webhook_deliveries_created_idx").on(t.createdAt),
    tenantIsolation(),
  ],
);

/** One HTTP attempt of a delivery: what the delivery log shows. */
export const webhookDeliveryAttempts = pgTable(
  "webhook_delivery_attempts",
  {
    id: bigserial({ mode: "number" }).primaryKey(),
    deliveryId: uuid()
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    attempt: integer().notNull(),
    /** The receiver's status; null when no answer came (timeout, refused destination, network). */
    statusCode: integer(),
    durationMs: integer().notNull().default(0),
    /** null on success; else `http_status`, `timeout`, `destination_refused`, `network`, `tls`, `dns`. */
    errorClass: text(),
    attemptedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique("webhook_delivery_attempts_unique").on(t.deliveryId, t.attempt),
    parentIsolation("webhook_delivery_attempts", "delivery_id", "webhook_deliveries"),
  ],
);

/** Which usage thresholds (80, 100 % of the limit) a tenant was told of, per feature and period: once each. */
export const usageThresholdNotices = pgTable(
  "usage_threshold_notices",
  {
    tenantId: tenantIdColumn(),
    featureKey: text().notNull(),
    periodStart: timestamp({ withTimezone: true }).notNull(),
    threshold: integer().notNull(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique("usage_threshold_notices_key").on(t.tenantId, t.featureKey, t.periodStart, t.threshold),
    tenantIsolation(),
  ],
);
