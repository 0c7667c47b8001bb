import { sql } from "drizzle-orm";
import { bigint, index, jsonb, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { tenantIsolation } from "./tenants.ts";

/**
 * The audit log (docs/audit.md): one row per recorded action, append-only, in one hash chain per
 * tenant (`tenant_id` null: the platform chain). `hash` is SHA-256 over the row's canonical content
 * and `prev_hash`, the hash of the row before it in the same chain. No foreign key: the log outlives
 * what it names.
 */
export const auditEvents = pgTable(
  "audit_events",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedByDefaultAsIdentity(),
    tenantId: uuid(),
    occurredAt: timestamp({ withTimezone: true }).notNull(),
    /** `user`, `apiKey`, `system` or `anonymous`. */
    actorType: text().notNull(),
    /** The user id, API key id or system component name; null for anonymous callers. */
    actorId: text(),
    action: text().notNull(),
    targetType: text(),
    targetId: text(),
    /** `success`, `failure` (a refused credential) or `denied` (a refused authorization). */
    outcome: text().notNull().default("success"),
    clientAddress: text(),
    userAgent: text(),
    requestId: text(),
    details: jsonb().$type<Record<string, unknown>>().notNull().default({}),
    prevHash: text().notNull(),
    hash: text().notNull(),
  },
  (t) => [
    index("audit_events_tenant_id_idx").on(t.tenantId, t.id),
    index("audit_events_occurred_at_idx").on(t.occurredAt),
    index("audit_events_action_idx").on(t.tenantId, t.action, t.id),
    tenantIsolation(),
  ],
);

/**
 * One row per chain (`chain`: the tenant id, or `platform`): its head (last row and hash), where it
 * starts after retention pruned a prefix (`start_hash`: the hash the first kept row's `prev_hash`
 * must equal), and the lock every writer of the chain takes (`FOR UPDATE` through an upsert).
 */
export const auditChains = pgTable("audit_chains", {
  chain: text().primaryKey(),
  headId: bigint({ mode: "number" }),
  headHash: text().notNull(),
  startHash: text().notNull(),
  /** The last row pruned (rows up to it are gone on purpose), null while nothing was pruned. */
  prunedThroughId: bigint({ mode: "number" }),
  prunedAt: timestamp({ withTimezone: true }),
  updatedAt: timestamp({ withTimezone: true }).notNull().default(sql`now()`),
});
