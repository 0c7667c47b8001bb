import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

export const jobStatuses = ["pending", "processing", "succeeded", "failed", "dead"] as const;
export type JobStatus = (typeof jobStatuses)[number];

export const backgroundJobs = pgTable(
  "background_jobs",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    kind: text().notNull(),
    payload: jsonb().notNull().default({}),
    status: text({ enum: jobStatuses }).notNull().default("pending"),
    runAfter: timestamp({ withTimezone: true }).notNull().defaultNow(),
    attempts: integer().notNull().default(0),
    maxAttempts: integer().notNull().default(10),
    lockedBy: text(),
    lockedUntil: timestamp({ withTimezone: true }),
    lastError: text(),
    dedupKey: text(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    check(
      "background_jobs_status_check",
      sql`${t.status} in ('pending', 'processing', 'succeeded', 'failed', 'dead')`,
    ),
    // the claim: due pending/failed jobs in run_after order, and expired leases
    index("background_jobs_due_idx").on(t.runAfter).where(sql`${t.status} in ('pending', 'failed')`),
    index("background_jobs_lease_idx").on(t.lockedUntil).where(sql`${t.status} = 'processing'`),
    uniqueIndex("background_jobs_dedup_key_idx")
      .on(t.dedupKey)
      .where(sql`${t.dedupKey} is not null and ${t.status} in ('pending', 'processing', 'failed')`),
    // admin listing by status/kind for the statuses the claim never reads; pending and failed are
    // listed through the due index. An index the claim could also use would let the planner pick it
    // on a table without statistics and sort the whole backlog on every claim.
    index("background_jobs_admin_idx")
      .on(t.status, t.kind, t.id)
      .where(sql`${t.status} in ('processing', 'succeeded', 'dead')`),
    index("background_jobs_finished_idx").on(t.finishedAt).where(sql`${t.finishedAt} is not null`),
  ],
);

export const catchUpPolicies = ["skip", "once", "all"] as const;
export type CatchUpPolicy = (typeof catchUpPolicies)[number];

/** Recurring schedules (src/jobs/schedules.ts): each slot of `cron` in `time_zone` enqueues one job. */
export const jobSchedules = pgTable(
  "job_schedules",
  {
    name: text().primaryKey(),
    cron: text().notNull(),
    timeZone: text().notNull().default("UTC"),
    kind: text().notNull(),
    payload: jsonb().notNull().default({}),
    enabled: boolean().notNull().default(true),
    catchUp: text({ enum: catchUpPolicies }).notNull().default("skip"),
    /** The latest slot handled (enqueued or skipped); slots after it are due. */
    lastSlot: timestamp({ withTimezone: true }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check("job_schedules_catch_up_check", sql`${t.catchUp} in ('skip', 'once', 'all')`)],
);
