import { sql } from "drizzle-orm";
import { check, jsonb, pgTable, text, unique, uuid } from "drizzle-orm/pg-core";
import { timestamps } from "./columns.ts";
import { tenantIdColumn, tenantIsolation } from "./tenants.ts";

export const providerTypes = ["identity", "sms", "payment", "notification", "ai"] as const;
export type ProviderType = (typeof providerTypes)[number];
export const providerStatuses = ["Active", "Disabled", "Suspended"] as const;
export type ProviderStatus = (typeof providerStatuses)[number];

/** A tenant's own external provider of one type; a Disabled or Suspended row means "none" for that tenant. */
export const tenantExternalProviders = pgTable(
  "tenant_external_providers",
  {
    id: uuid().primaryKey().defaultRandom(),
    tenantId: tenantIdColumn(),
    type: text({ enum: providerTypes }).notNull(),
    /** Implementation name, e.g. `twilio`, `stripe`, `openai`. */
    provider: text().notNull(),
    status: text({ enum: providerStatuses }).notNull().default("Active"),
    /** Non-secret settings (endpoints, sender ids, options). */
    settings: jsonb().$type<Record<string, unknown>>().notNull().default({}),
    /** Setting name → tenant secret name: secret values live in `tenant_secrets` only. */
    secretRefs: jsonb().$type<Record<string, string>>().notNull().default({}),
    ...timestamps,
  },
  (t) => [
    unique("tenant_external_providers_tenant_type_unique").on(t.tenantId, t.type),
    check(
      "tenant_external_providers_type_check",
      sql`${t.type} in ('identity', 'sms', 'payment', 'notification', 'ai')`,
    ),
    check("tenant_external_providers_status_check", sql`${t.status} in ('Active', 'Disabled', 'Suspended')`),
    tenantIsolation(),
  ],
);
