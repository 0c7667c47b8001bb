import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";

export const jobStatuses = [
  "pending",
  "processing",
  "succeeded",
  "failed",
  "dead",
  "canceled",
  "waiting",
] as const;
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
    /** Fairness group (round robin among due jobs of one priority); a tenant's job defaults to its tenant id. */
    groupKey: text(),
    /** Higher runs first, before fairness; default 0. */
    priority: integer().notNull().default(0),
    /** What the handler last reported through `context.progress(value)` (JSON, at most 4 KiB). */
    progress: jsonb(),
    /** The `job_group_slots` slot a processing job of a kind with `groupConcurrency` holds. */
    groupSlot: integer(),
    /** The flow (`enqueueFlow`) the job belongs to; null for a job enqueued on its own. */
    flowId: uuid(),
    /** The job's key within its flow (what `dependsOn` names). */
    flowKey: text(),
    /** Parents not yet resolved; a `waiting` job becomes `pending` when it reaches 0. */
    waitingOn: integer().notNull().default(0),
    /** What a parent that ends dead or canceled does to this job: `cancel` (null), `run` or `wait`. */
    onParentFailure: text({ enum: ["cancel", "run", "wait"] }),
    /** Other jobs depend on this one: its end resolves their edges (trigger, drizzle/0018). */
    hasDependents: boolean().notNull().default(false),
    /** The handler's return value (JSON, at most 64 KiB); null when it returned nothing. */
    result: jsonb(),
    /** A debounced job (`enqueue(…, { debounce })`): one pending job per key. */
    debounceKey: text(),
    /**
     * The rate-limit key of a job whose kind declares `rateLimit` (its `key(payload)`, computed at
     * enqueue); null: not rate limited. The claim takes a token of `job_rate_limits` for it.
     */
    rateKey: text(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    check(
      "background_jobs_status_check",
      sql`${t.status} in ('pending', 'processing', 'succeeded', 'failed', 'dead', 'canceled', 'waiting')`,
    ),
    check(
      "background_jobs_on_parent_failure_check",
      sql`${t.onParentFailure} is null or ${t.onParentFailure} in ('cancel', 'run', 'wait')`,
    ),
    // the claim: due pending/failed jobs in run_after order, and expired leases
    index("background_jobs_due_idx").on(t.runAfter).where(sql`${t.status} in ('pending', 'failed')`),
    // the fair claim: the top priority, then a walk over due groups (a null group is the key ''),
    // each group's jobs in run_after order (src/jobs/claim.ts). No deduplication: jobs enqueued
    // together share a key, and a posting list of a group's jobs can be marked dead only when all
    // of them are claimed; until then every claim re-reads the claimed ones' dead heap tuples
    // (docs/decisions.md)
    index("background_jobs_fair_idx")
      .on(t.priority, sql`coalesce(${t.groupKey}, '')`, t.runAfter)
      .where(sql`${t.status} in ('pending', 'failed')`)
      .with({ deduplicate_items: false }),
    index("background_jobs_lease_idx").on(t.lockedUntil).where(sql`${t.status} = 'processing'`),
    uniqueIndex("background_jobs_dedup_key_idx")
      .on(t.dedupKey)
      .where(sql`${t.dedupKey} is not null and ${t.status} in ('pending', 'processing', 'failed')`),
    // admin listing by status/kind for the finished statuses, which the claim never reads; pending and
    // failed are listed through the due index, processing (a few rows) through the lease index. An
    // index the claim could also use would let the planner pick it: on a table without statistics
    // sorting the whole backlog, and for the expired-lease branch in a cost tie with the lease index.
    index("background_jobs_admin_idx")
      .on(t.status, t.kind, t.id)
      .where(sql`${t.status} in ('succeeded', 'dead', 'canceled')`),
    // admin listing and bulk actions by group (a tenant id): newest first without reading other groups
    index("background_jobs_group_idx").on(t.groupKey, t.id).where(sql`${t.groupKey} is not null`),
    // a flow's jobs (GET /api/admin/flows/{flowId}, the flow cancel)
    index("background_jobs_flow_idx").on(t.flowId, t.id).where(sql`${t.flowId} is not null`),
    // one pending job per debounce key: a later enqueue updates it (src/jobs/debounce.ts)
    uniqueIndex("background_jobs_debounce_key_idx")
      .on(t.debounceKey)
      .where(sql`${t.debounceKey} is not null and ${t.status} = 'pending'`),
    // the claim's push of a key's due jobs beyond its rate (src/jobs/claim-rate.ts)
    index("background_jobs_rate_idx")
      .on(t.rateKey, t.runAfter)
      .where(sql`${t.rateKey} is not null and ${t.status} in ('pending', 'failed')`),
    // the next time a rate-limited job is due: the loop wakes then instead of at its next poll
    index("background_jobs_rate_due_idx")
      .on(t.runAfter)
      .where(sql`${t.rateKey} is not null and ${t.status} in ('pending', 'failed')`),
    index("background_jobs_finished_idx").on(t.finishedAt).where(sql`${t.finishedAt} is not null`),
  ],
);

/**
 * One row per running job of a kind with `groupConcurrency`: slot 1..limit of (kind, group). The
 * claim inserts the row (ON CONFLICT DO NOTHING, so two claimers can never hold one slot); a trigger
 * deletes it when the job leaves `processing` (drizzle/0014_job_group_slots.sql).
 */
export const jobGroupSlots = pgTable(
  "job_group_slots",
  {
    kind: text().notNull(),
    /** '' for jobs without a group. */
    groupKey: text().notNull(),
    slot: integer().notNull(),
    jobId: bigint({ mode: "number" }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.kind, t.groupKey, t.slot] }),
    index("job_group_slots_job_idx").on(t.jobId),
  ],
);

/**
 * The edges of flows: `child_id` runs once every parent is resolved (succeeded, or ended under a
 * policy that lets it run). A trigger resolves a parent's edges when it ends (drizzle/0018), so
 * the claim never reads this table.
 */
export const jobDependencies = pgTable(
  "job_dependencies",
  {
    parentId: bigint({ mode: "number" })
      .notNull()
      .references(() => backgroundJobs.id, { onDelete: "cascade" }),
    childId: bigint({ mode: "number" })
      .notNull()
      .references(() => backgroundJobs.id, { onDelete: "cascade" }),
    resolved: boolean().notNull().default(false),
  },
  (t) => [
    primaryKey({ columns: [t.parentId, t.childId] }),
    index("job_dependencies_child_idx").on(t.childId),
  ],
);

/**
 * Per rate key, the state the claim keeps (src/jobs/claim-rate.ts): `tat`, the theoretical arrival
 * time of GCRA (a token bucket of `limit` tokens refilled at `limit` per period), and `next_at`, the
 * end of the spread of the key's jobs pushed beyond the rate (the next pushed job goes there). A
 * missing row is a full bucket; the claim inserts it.
 */
export const jobRateLimits = pgTable("job_rate_limits", {
  rateKey: text().primaryKey(),
  tat: timestamp({ withTimezone: true }).notNull().default(sql`'-infinity'`),
  nextAt: timestamp({ withTimezone: true }).notNull().default(sql`'-infinity'`),
});

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
