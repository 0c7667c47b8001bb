import { bigint, index, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Security-window and rate-limit state when no cache is configured (Development): one row per
 * counter key, so several processes on one database agree. Never used when a cache is configured.
 */
export const securityCounters = pgTable(
  "security_counters",
  {
    key: text().primaryKey(),
    /** Sliding-log windows: epoch milliseconds of the attempts still inside the window. */
    hits: bigint({ mode: "number" }).array().notNull().default([]),
    /** Rate limiter (GCRA): theoretical arrival time, epoch microseconds. */
    tat: bigint({ mode: "number" }),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
  },
  (t) => [index("security_counters_expires_at_idx").on(t.expiresAt)],
);
