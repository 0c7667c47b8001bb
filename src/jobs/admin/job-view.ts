import { type Clock, isoOrNull, isoText } from "../../clock.ts";
import type { Database } from "../../db/client.ts";
import type { JobStatus } from "../../db/schema/jobs.ts";
import type { Logger } from "../../telemetry/logger.ts";

/** The states a job can be in, for filters and views (the column's enum). */
export { jobStatuses } from "../../db/schema/jobs.ts";

export interface JobAdminDeps {
  database: Pick<Database, "db">;
  clock: Clock;
  logger: Logger;
}

export interface JobView {
  id: number;
  kind: string;
  payload: unknown;
  status: JobStatus;
  runAfter: string;
  attempts: number;
  maxAttempts: number;
  lockedBy: string | null;
  lockedUntil: string | null;
  lastError: string | null;
  dedupKey: string | null;
  /** Fairness group (a tenant's job: its tenant id); null when the job has none. */
  groupKey: string | null;
  /** Higher runs first. */
  priority: number;
  /** What the handler last reported through `context.progress`; null when it never did. */
  progress: unknown;
  /** The handler's return value (JSON); null when it returned nothing or has not succeeded. */
  result: unknown;
  /** The flow (`enqueueFlow`) the job belongs to, and its key there; null for a job on its own. */
  flowId: string | null;
  flowKey: string | null;
  /** Parents not yet resolved (a `waiting` job runs when this reaches 0). */
  waitingOn: number;
  /** What a dead or canceled parent does to it: `cancel` (the default), `run` or `wait`. */
  onParentFailure: "cancel" | "run" | "wait";
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

/** A `background_jobs` row as `select *` returns it. */
export interface JobRow {
  id: string | number;
  kind: string;
  payload: unknown;
  status: JobStatus;
  run_after: string | Date;
  attempts: number;
  max_attempts: number;
  locked_by: string | null;
  locked_until: string | Date | null;
  last_error: string | null;
  dedup_key: string | null;
  group_key: string | null;
  priority: number;
  progress: unknown;
  result: unknown;
  flow_id: string | null;
  flow_key: string | null;
  waiting_on: number;
  on_parent_failure: "cancel" | "run" | "wait" | null;
  created_at: string | Date;
  updated_at: string | Date;
  finished_at: string | Date | null;
}

export function toJobView(r: JobRow): JobView {
  return {
    id: Number(r.id),
    kind: r.kind,
    payload: r.payload,
    status: r.status,
    runAfter: isoText(r.run_after),
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    lockedBy: r.locked_by,
    lockedUntil: isoOrNull(r.locked_until),
    lastError: r.last_error,
    dedupKey: r.dedup_key,
    groupKey: r.group_key,
    priority: r.priority,
    progress: r.progress ?? null,
    result: r.result ?? null,
    flowId: r.flow_id,
    flowKey: r.flow_key,
    waitingOn: r.waiting_on,
    onParentFailure: r.on_parent_failure ?? "cancel",
    createdAt: isoText(r.created_at),
    updatedAt: isoText(r.updated_at),
    finishedAt: isoOrNull(r.finished_at),
  };
}
