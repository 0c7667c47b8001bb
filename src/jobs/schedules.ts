import { sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { type Clock, isoOrNull, isoText } from "../clock.ts";
import type { Ctx } from "../context.ts";
import { type Database, type Executor, execute } from "../db/client.ts";
import { withDatabase, withPlatformTransaction, withTransaction } from "../db/operation.ts";
import { type CatchUpPolicy, catchUpPolicies } from "../db/schema/jobs.ts";
import { AppError } from "../errors.ts";
import { cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import type { Logger } from "../telemetry/logger.ts";
import { enqueue, enqueueMany } from "./enqueue.ts";
import type { JobKind } from "./registry.ts";
import { nextSlots, parseCron, planDueSlots } from "./schedule-slots.ts";

export type { CatchUpPolicy };
export { catchUpPolicies };

export interface ScheduleDeps {
  database: Database;
  clock: Clock;
  logger: Logger;
  config: { settings: { BackgroundProcessing: { JobMaxAttempts: number; MaxCatchUpRuns: number } } };
}

/** A schedule as code defines it (seeded at start) and as `PUT /api/admin/schedules/{name}` sets it. */
export interface ScheduleSpec {
  cron: string;
  timeZone?: string;
  kind: string;
  payload?: Record<string, unknown>;
  enabled?: boolean;
  catchUp?: CatchUpPolicy;
}

export interface ScheduleDefinition extends Required<ScheduleSpec> {
  name: string;
}

export interface ScheduleView extends ScheduleDefinition {
  lastSlot: string | null;
  /** The next three slots after now (none while disabled). */
  nextRuns: string[];
  createdAt: string;
  updatedAt: string;
}

const NAME = /^[a-z0-9][a-z0-9._:-]{0,99}$/;
const KIND = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/;

function checkName(name: string): void {
  if (!NAME.test(name))
    throw new AppError("validation_failed", "The schedule name is not valid.", {
      fields: [{ path: "name", message: "lower-case letters, digits, '.', '_', ':' or '-', at most 100" }],
    });
}

function normalise(name: string, spec: ScheduleSpec): ScheduleDefinition {
  checkName(name);
  const timeZone = spec.timeZone ?? "UTC";
  parseCron(spec.cron, timeZone);
  if (!KIND.test(spec.kind))
    throw new AppError("validation_failed", "The job kind is not valid.", {
      fields: [{ path: "kind", message: "dotted lower-case words" }],
    });
  return {
    name,
    cron: spec.cron,
    timeZone,
    kind: spec.kind,
    payload: spec.payload ?? {},
    enabled: spec.enabled ?? true,
    catchUp: spec.catchUp ?? "skip",
  };
}

/** A schedule defined in code; an invalid cron, zone or kind throws at definition time. */
export function defineSchedule(name: string, spec: ScheduleSpec): ScheduleDefinition {
  return normalise(name, spec);
}

/** The kind a slot enqueues, by name: the process that runs it validates the payload with its schema. */
function slotJob(kind: string): JobKind {
  return { kind, schema: z.unknown() };
}

const slotKey = (name: string, slot: Date) => `schedule:${name}:${slot.toISOString()}`;

/**
 * Inserts the schedules defined in code that the table lacks (idempotent, at every start): a
 * schedule already stored keeps what it has, so runtime edits win over the code.
 */
export async function seedSchedules(
  deps: Pick<ScheduleDeps, "database" | "clock">,
  ctx: Ctx,
  input: { schedules: ScheduleDefinition[] },
): Promise<number> {
  if (input.schedules.length === 0) return 0;
  const now = deps.clock.now().toISOString();
  const rows = await withDatabase(deps, ctx, (db) =>
    execute<{ name: string }>(
      db,
      sql`insert into job_schedules (name, cron, time_zone, kind, payload, enabled, catch_up, last_slot, created_at, updated_at)
        select s.name, s.cron, s."timeZone", s.kind, s.payload, s.enabled, s."catchUp",
               ${now}::timestamptz, ${now}::timestamptz, ${now}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(input.schedules)}::jsonb)
          as s(name text, cron text, "timeZone" text, kind text, payload jsonb, enabled boolean, "catchUp" text)
        on conflict (name) do nothing
        returning name`,
    ),
  );
  return rows.length;
}

interface ScheduleRow {
  name: string;
  cron: string;
  time_zone: string;
  kind: string;
  payload: Record<string, unknown>;
  enabled: boolean;
  catch_up: CatchUpPolicy;
  last_slot: string | Date | null;
  created_at: string | Date;
  updated_at: string | Date;
}

/** Enqueues one schedule's due slots and advances its `last_slot`, in one transaction on `tx`. */
async function enqueueOne(deps: ScheduleDeps, tx: Executor, row: ScheduleRow, now: Date): Promise<number> {
  const cron = parseCron(row.cron, row.time_zone);
  const plan = planDueSlots(cron, {
    after: new Date(row.last_slot ?? row.created_at),
    now,
    catchUp: row.catch_up,
    maxRuns: deps.config.settings.BackgroundProcessing.MaxCatchUpRuns,
  });
  if (!plan.lastSlot) return 0;
  const context = {
    clock: deps.clock,
    defaultMaxAttempts: deps.config.settings.BackgroundProcessing.JobMaxAttempts,
  };
  const job = slotJob(row.kind);
  const ids = await enqueueMany(
    tx,
    context,
    plan.enqueue.map((slot) => ({
      job,
      payload: row.payload,
      options: { dedupKey: slotKey(row.name, slot) },
    })),
  );
  await execute(
    tx,
    sql`update job_schedules set last_slot = ${plan.lastSlot.toISOString()}::timestamptz where name = ${row.name}`,
  );
  if (plan.dropped > 0)
    deps.logger.info("schedule slots not run", {
      schedule: row.name,
      catchUp: row.catch_up,
      dropped: plan.dropped,
      enqueued: plan.enqueue.length,
    });
  return ids.length;
}

/**
 * The schedules step (src/loops/schedules-loop.ts runs it every second in every API process):
 * for each enabled schedule with a slot due after its `last_slot`, locks the row (`for update skip
 * locked`: a schedule another process is handling is left to it), enqueues the slots its catch-up
 * policy keeps, each with the dedup key `schedule:<name>:<ISO slot>`, and advances `last_slot`, all
 * in one transaction. Each slot is enqueued once however many processes run the step.
 */
export async function enqueueDueSlots(
  deps: ScheduleDeps,
  ctx: Ctx,
  input: { now: Date },
): Promise<{ enqueued: number }> {
  const candidates = await withDatabase(deps, ctx, (db) =>
    execute<ScheduleRow>(db, sql`select * from job_schedules where enabled`),
  );
  let enqueued = 0;
  for (const candidate of candidates) {
    try {
      // a cheap look without a lock first: most ticks find nothing due
      const plan = planDueSlots(parseCron(candidate.cron, candidate.time_zone), {
        after: new Date(candidate.last_slot ?? candidate.created_at),
        now: input.now,
        catchUp: "skip",
        maxRuns: 1,
      });
      if (!plan.lastSlot) continue;
      // one transaction per schedule: a broken one rolls back alone
      enqueued += await withTransaction(deps, ctx, async (tx) => {
        const [row] = await execute<ScheduleRow>(
          tx,
          sql`select * from job_schedules where name = ${candidate.name} and enabled for update skip locked`,
        );
        return row ? enqueueOne(deps, tx, row, input.now) : 0;
      });
    } catch (error) {
      // one broken schedule (a cron edited by hand in the table) must not stop the others
      deps.logger.error("schedule not enqueued", {
        schedule: candidate.name,
        error: (error as Error).message,
      });
    }
  }
  return { enqueued };
}

function toView(row: ScheduleRow, now: Date): ScheduleView {
  let nextRuns: string[] = [];
  if (row.enabled) {
    try {
      nextRuns = nextSlots(parseCron(row.cron, row.time_zone), now, 3).map((d) => d.toISOString());
    } catch {
      nextRuns = [];
    }
  }
  return {
    name: row.name,
    cron: row.cron,
    timeZone: row.time_zone,
    kind: row.kind,
    payload: row.payload,
    enabled: row.enabled,
    catchUp: row.catch_up,
    lastSlot: isoOrNull(row.last_slot),
    nextRuns,
    createdAt: isoText(row.created_at),
    updatedAt: isoText(row.updated_at),
  };
}

/** A position in the schedule list: the last name seen (keyset). */
const scheduleCursor = cursorCodec(z.object({ name: z.string().min(1).max(200) }));

/** The schedules by name, each with its next run times, a page at a time. */
export async function listSchedulePage(
  deps: Pick<ScheduleDeps, "database" | "clock">,
  ctx: Ctx,
  input: PageRequest,
): Promise<Page<ScheduleView>> {
  const after = scheduleCursor.decodeOptional(input.cursor)?.name;
  const rows = await withDatabase(deps, ctx, (db) =>
    execute<ScheduleRow>(
      db,
      sql`select * from job_schedules where ${after === undefined ? sql`true` : sql`name > ${after}`} order by name limit ${input.limit + 1}`,
    ),
  );
  const now = deps.clock.now();
  return pageOf(
    rows,
    input.limit,
    (row) => toView(row, now),
    (row) => ({ name: row.name }),
    scheduleCursor,
  );
}

/** Every schedule by name, each with its next run times (the console's one page). */
export async function listSchedules(
  deps: Pick<ScheduleDeps, "database" | "clock">,
  ctx: Ctx,
): Promise<ScheduleView[]> {
  const rows = await withDatabase(deps, ctx, (db) =>
    execute<ScheduleRow>(db, sql`select * from job_schedules order by name`),
  );
  const now = deps.clock.now();
  return rows.map((row) => toView(row, now));
}

/**
 * Creates or replaces a schedule. A new schedule, a changed cron or zone, or a schedule enabled
 * again starts from now: the slots before are not caught up.
 */
export async function putSchedule(
  deps: Pick<ScheduleDeps, "database" | "clock">,
  ctx: Ctx,
  input: { name: string; knownKinds?: readonly string[] } & ScheduleSpec,
): Promise<{ schedule: ScheduleView; created: boolean }> {
  const { name, knownKinds, ...spec } = input;
  const s = normalise(name, spec);
  // a kind no handler is registered for would queue a job no process ever runs, every slot
  if (knownKinds && !knownKinds.includes(s.kind))
    throw new AppError("validation_failed", "No handler is registered for this job kind.", {
      fields: [{ path: "kind", message: `not a known job kind: one of ${knownKinds.join(", ")}` }],
    });
  const now = deps.clock.now();
  const at = sql`${now.toISOString()}::timestamptz`;
  const row = await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const [upserted] = await execute<ScheduleRow & { created: boolean }>(
      tx,
      sql`insert into job_schedules as j (name, cron, time_zone, kind, payload, enabled, catch_up, last_slot, created_at, updated_at)
        values (${s.name}, ${s.cron}, ${s.timeZone}, ${s.kind}, ${JSON.stringify(s.payload)}::jsonb, ${s.enabled},
                ${s.catchUp}, ${at}, ${at}, ${at})
        on conflict (name) do update set
          cron = excluded.cron, time_zone = excluded.time_zone, kind = excluded.kind,
          payload = excluded.payload, enabled = excluded.enabled, catch_up = excluded.catch_up,
          last_slot = case
            when j.cron <> excluded.cron or j.time_zone <> excluded.time_zone or (excluded.enabled and not j.enabled)
            then excluded.last_slot else j.last_slot end,
          updated_at = excluded.updated_at
        returning *, (xmax = 0) as created`,
    );
    if (!upserted) throw new Error("upsert of a schedule returned no row");
    await recordAudit(tx, ctx, {
      action: "schedule.updated",
      target: { type: "schedule", id: s.name },
      details: { kind: s.kind, status: s.enabled ? "enabled" : "disabled", value: s.cron },
    });
    return upserted;
  });
  return { schedule: toView(row, now), created: row.created };
}

/** Deletes a schedule (its jobs already enqueued stay); 404 for an unknown name. */
export async function deleteSchedule(
  deps: Pick<ScheduleDeps, "database">,
  ctx: Ctx,
  input: { name: string },
): Promise<void> {
  await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const rows = await execute<{ name: string }>(
      tx,
      sql`delete from job_schedules where name = ${input.name} returning name`,
    );
    if (rows.length === 0) throw new AppError("not_found", "No schedule with this name.");
    await recordAudit(tx, ctx, { action: "schedule.deleted", target: { type: "schedule", id: input.name } });
  });
}

/** Enqueues one run of a schedule now, outside its slots (`last_slot` unchanged); 404 for an unknown name. */
export async function runScheduleNow(
  deps: ScheduleDeps,
  ctx: Ctx,
  input: { name: string },
): Promise<{ jobId: number }> {
  const now = deps.clock.now();
  const id = await withPlatformTransaction(deps, ctx, async (tx, ctx) => {
    const [row] = await execute<ScheduleRow>(tx, sql`select * from job_schedules where name = ${input.name}`);
    if (!row) throw new AppError("not_found", "No schedule with this name.");
    const job = await enqueue(
      tx,
      { clock: deps.clock, defaultMaxAttempts: deps.config.settings.BackgroundProcessing.JobMaxAttempts },
      slotJob(row.kind),
      row.payload,
      { dedupKey: `schedule:${row.name}:run:${now.toISOString()}` },
    );
    await recordAudit(tx, ctx, {
      action: "schedule.run",
      target: { type: "schedule", id: row.name },
      details: { kind: row.kind, value: job.id },
    });
    return job.id;
  });
  return { jobId: id };
}
