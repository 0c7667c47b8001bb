import { type SQL, sql } from "drizzle-orm";
import type { JobStatus } from "../../db/schema/jobs.ts";
import { AppError } from "../../errors.ts";
import { ts } from "../queue.ts";

/** Which jobs a list or a bulk action covers; every field narrows, none means all. */
export interface JobFilter {
  status?: JobStatus;
  kind?: string;
  /** A group key (`group_key`), e.g. a tenant id. */
  group?: string;
  /** Created at or after. */
  createdFrom?: Date;
  /** Created before. */
  createdTo?: Date;
  /** The jobs of one flow (`enqueueFlow`): the flow cancel. */
  flowId?: string;
}

/** Statuses a job can be retried from (an admin's retry): it never succeeded and nothing runs it. */
export const RETRYABLE_STATUSES = ["dead", "canceled"] as const satisfies readonly JobStatus[];
/** Statuses a job can be canceled in: it has not finished. */
export const CANCELLABLE_STATUSES = [
  "pending",
  "failed",
  "processing",
  "waiting",
] as const satisfies readonly JobStatus[];

export const inList = (values: readonly string[]) =>
  sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  );

export function filterConditions(filter: JobFilter): SQL[] {
  const conditions: SQL[] = [];
  if (filter.status) conditions.push(sql`status = ${filter.status}`);
  if (filter.kind) conditions.push(sql`kind = ${filter.kind}`);
  if (filter.group !== undefined) conditions.push(sql`group_key = ${filter.group}`);
  if (filter.createdFrom) conditions.push(sql`created_at >= ${ts(filter.createdFrom)}`);
  if (filter.createdTo) conditions.push(sql`created_at < ${ts(filter.createdTo)}`);
  if (filter.flowId !== undefined) conditions.push(sql`flow_id = ${filter.flowId}::uuid`);
  return conditions;
}

export const whereAll = (conditions: SQL[]) =>
  conditions.length === 0 ? sql`true` : sql.join(conditions, sql` and `);

/** The filter as a log line shows it (dates as ISO text, absent fields left out). */
export function describeFilter(filter: JobFilter): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(filter))
    if (value !== undefined) out[key] = value instanceof Date ? value.toISOString() : String(value);
  return out;
}

/** A bulk action needs a filter, and a status it can act on. */
export function checkBulkFilter(filter: JobFilter, allowed: readonly JobStatus[], action: string): void {
  if (Object.values(filter).every((v) => v === undefined))
    throw new AppError("validation_failed", `A bulk ${action} needs a filter.`, {
      fields: [{ path: "", message: "give at least one of status, kind, group, createdFrom, createdTo" }],
    });
  if (filter.status && !allowed.includes(filter.status))
    throw new AppError("validation_failed", `A bulk ${action} acts on ${allowed.join(", ")} jobs only.`, {
      fields: [{ path: "status", message: `must be one of ${allowed.join(", ")}` }],
    });
}
