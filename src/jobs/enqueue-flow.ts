import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import type { z } from "zod";
import type { Ctx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import { isTransientConflict } from "../db/database-failure.ts";
import { type DatabaseDeps, withTransaction } from "../db/operation.ts";
import { type EnqueueOptions, enqueueContext, JOBS_CHANNEL, toRow } from "./enqueue.ts";
import { ts } from "./queue.ts";
import type { JobKind } from "./registry.ts";

/** What a parent that ends dead or canceled does to a child: cancel it (default), run it, or wait. */
export type ParentFailurePolicy = "cancel" | "run" | "wait";

/** One job of a flow. `dependsOn` names keys of this flow or ids of jobs enqueued before. */
export interface FlowJob<S extends z.ZodType = z.ZodType> {
  key: string;
  kind: JobKind<S>;
  payload: z.input<S>;
  dependsOn?: (string | number)[];
  onParentFailure?: ParentFailurePolicy;
  /** The options of `enqueue` but a dedup key (a flow's jobs are always created). */
  options?: Omit<EnqueueOptions, "dedupKey">;
}

/** A flow that cannot be enqueued (a programming error): nothing is stored. */
export class InvalidFlowError extends Error {
  override name = "InvalidFlowError";
}

type FlowDeps = DatabaseDeps & Parameters<typeof enqueueContext>[0];

/** The most jobs one flow may hold. */
export const MAX_FLOW_JOBS = 50_000;

/**
 * Enqueues a set of jobs with `dependsOn` edges in one transaction; a cycle, an unknown key or id,
 * or a key given twice refuses the whole set. A job with parents waits (`waiting`) until every
 * parent succeeded; a parent that ends dead or canceled applies the child's `onParentFailure`.
 * Returns the flow id (to list or cancel the set) and each key's job id. Parents named by id are
 * locked in id order; a transaction of its own that PostgreSQL aborts to break a deadlock (40P01:
 * nothing stored) is tried again, up to three times.
 */
export async function enqueueFlow(
  deps: FlowDeps,
  ctx: Ctx,
  input: { jobs: FlowJob[] },
): Promise<{ flowId: string; jobs: Record<string, number> }> {
  const { jobs } = input;
  checkFlow(jobs);
  const context = enqueueContext(deps);
  const now = context.clock.now();
  const flowId = randomUUID();
  const keyed = new Set<string>();
  for (const job of jobs)
    for (const parent of job.dependsOn ?? []) if (typeof parent === "string") keyed.add(parent);
  const externalIds = [
    ...new Set(jobs.flatMap((j) => (j.dependsOn ?? []).filter((p) => typeof p === "number"))),
  ];
  const enqueueOnce = () =>
    withTransaction(deps, ctx, async (tx) => {
      const external = await lockExternalParents(tx, externalIds);
      const rows = jobs.map((job) => {
        const row = toRow(context, now, { job: job.kind, payload: job.payload, options: job.options });
        let waitingOn = 0;
        let note: string | null = null;
        for (const parent of job.dependsOn ?? []) {
          if (typeof parent === "string") {
            waitingOn++;
            continue;
          }
          const status = external.get(parent) as string;
          if (
            status === "succeeded" ||
            ((status === "dead" || status === "canceled") && job.onParentFailure === "run")
          )
            continue;
          waitingOn++;
          if (status === "dead" || status === "canceled") note = `parent job ${parent} ended ${status}`;
        }
        return {
          ...row,
          flowKey: job.key,
          status: waitingOn > 0 ? "waiting" : "pending",
          waitingOn,
          onParentFailure: job.onParentFailure ?? null,
          hasDependents: keyed.has(job.key),
          lastError: note,
        };
      });
      const inserted = await execute<{ id: string | number; flow_key: string }>(
        tx,
        sql`with inserted as (
            insert into background_jobs (kind, payload, run_after, max_attempts, group_key, priority, rate_key, flow_id,
              flow_key, status, waiting_on, on_parent_failure, has_dependents, last_error, created_at, updated_at)
            select r.kind, r.payload, r."runAfter", r."maxAttempts", r."groupKey", r.priority, r."rateKey", ${flowId}::uuid,
              r."flowKey", r.status, r."waitingOn", r."onParentFailure", r."hasDependents", r."lastError", ${ts(now)}, ${ts(now)}
            from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
              as r(kind text, payload jsonb, "runAfter" timestamptz, "maxAttempts" int, "groupKey" text, priority int,
                   "rateKey" text, "flowKey" text, status text, "waitingOn" int, "onParentFailure" text,
                   "hasDependents" boolean, "lastError" text)
            returning id, flow_key, status, run_after
          ),
          wake as (
            select pg_notify(${JOBS_CHANNEL}, '')
            from (select 1 from inserted where status = 'pending' and run_after <= ${ts(now)} limit 1) due
          )
          select id, flow_key, (select count(*) from wake) as notified from inserted`,
      );
      const ids: Record<string, number> = {};
      for (const r of inserted) ids[r.flow_key] = Number(r.id);
      const edges = jobs.flatMap((job) =>
        (job.dependsOn ?? []).map((parent) => {
          const parentId = typeof parent === "string" ? (ids[parent] as number) : parent;
          const status = typeof parent === "number" ? external.get(parent) : undefined;
          const resolved =
            status === "succeeded" ||
            ((status === "dead" || status === "canceled") && job.onParentFailure === "run");
          return { parent: parentId, child: ids[job.key] as number, resolved };
        }),
      );
      if (edges.length > 0)
        await execute(
          tx,
          sql`insert into job_dependencies (parent_id, child_id, resolved)
            select e.parent, e.child, e.resolved
            from jsonb_to_recordset(${JSON.stringify(edges)}::jsonb) as e(parent bigint, child bigint, resolved boolean)`,
        );
      // a child whose parent already ended dead or canceled, under the default policy: canceled now
      // (the trigger applies the same to its own dependents in this flow)
      const canceled = jobs
        .filter((job) => (job.onParentFailure ?? "cancel") === "cancel")
        .filter((job) =>
          (job.dependsOn ?? []).some(
            (p) => typeof p === "number" && ["dead", "canceled"].includes(external.get(p) ?? ""),
          ),
        )
        .map((job) => ids[job.key] as number);
      if (canceled.length > 0)
        await execute(
          tx,
          sql`update background_jobs set status = 'canceled', finished_at = ${ts(now)}, updated_at = ${ts(now)}
            where id = any(${`{${canceled.join(",")}}`}::bigint[])`,
        );
      return { flowId, jobs: ids };
    });
  // in the caller's transaction a deadlock aborts the caller's work too: the caller decides
  if (ctx.tx) return enqueueOnce();
  for (let attempt = 1; ; attempt++) {
    try {
      return await enqueueOnce();
    } catch (error) {
      // the victim of a deadlock stored nothing: the whole flow again (docs/jobs.md, "Lock order")
      if (attempt >= FLOW_ATTEMPTS || !isTransientConflict(error)) throw error;
    }
  }
}

/** Tries of a flow's transaction that PostgreSQL aborts to break a deadlock. */
const FLOW_ATTEMPTS = 3;

/** Keys unique, every string parent a key of the flow, no job its own parent, no cycle. */
function checkFlow(jobs: FlowJob[]): void {
  if (jobs.length === 0) throw new InvalidFlowError("a flow needs at least one job");
  if (jobs.length > MAX_FLOW_JOBS) throw new InvalidFlowError(`a flow holds at most ${MAX_FLOW_JOBS} jobs`);
  const keys = new Set<string>();
  for (const job of jobs) {
    if (typeof job.key !== "string" || job.key.length === 0 || job.key.length > 200)
      throw new InvalidFlowError("every job of a flow needs a key of 1 to 200 characters");
    if (keys.has(job.key)) throw new InvalidFlowError(`the key "${job.key}" is given twice`);
    keys.add(job.key);
    if (job.onParentFailure !== undefined && !["cancel", "run", "wait"].includes(job.onParentFailure))
      throw new InvalidFlowError(`onParentFailure of "${job.key}" must be cancel, run or wait`);
  }
  // Kahn's algorithm over the flow's own edges: what is left once no job without parents remains is a cycle
  const parents = new Map<string, Set<string>>();
  const children = new Map<string, string[]>();
  for (const job of jobs) {
    const own = new Set<string>();
    for (const parent of job.dependsOn ?? []) {
      if (typeof parent === "number") {
        if (!Number.isSafeInteger(parent) || parent < 1)
          throw new InvalidFlowError(`"${job.key}" depends on ${parent}, which is not a job id`);
        continue;
      }
      if (!keys.has(parent))
        throw new InvalidFlowError(`"${job.key}" depends on "${parent}", which is not in the flow`);
      if (parent === job.key) throw new InvalidFlowError(`"${job.key}" depends on itself`);
      if (own.has(parent)) throw new InvalidFlowError(`"${job.key}" names "${parent}" twice`);
      own.add(parent);
      children.set(parent, [...(children.get(parent) ?? []), job.key]);
    }
    parents.set(job.key, own);
  }
  const ready = jobs.filter((j) => (parents.get(j.key)?.size ?? 0) === 0).map((j) => j.key);
  const left = new Map([...parents].map(([key, set]) => [key, set.size]));
  let done = 0;
  while (ready.length > 0) {
    const key = ready.pop() as string;
    done++;
    for (const child of children.get(key) ?? []) {
      const n = (left.get(child) ?? 0) - 1;
      left.set(child, n);
      if (n === 0) ready.push(child);
    }
  }
  if (done < jobs.length) {
    const stuck = [...left].filter(([, n]) => n > 0).map(([key]) => key);
    throw new InvalidFlowError(
      `the flow has a cycle through ${stuck
        .slice(0, 5)
        .map((k) => `"${k}"`)
        .join(", ")}`,
    );
  }
}

/** Parents named by id: locked (so none ends unseen before the edges exist) and marked; status by id. */
async function lockExternalParents(tx: Executor, ids: number[]): Promise<Map<number, string>> {
  if (ids.length === 0) return new Map();
  const rows = await execute<{ id: string | number; status: string }>(
    tx,
    sql`update background_jobs j set has_dependents = true
        from (select id from background_jobs where id = any(${`{${ids.join(",")}}`}::bigint[]) order by id for update) l
        where j.id = l.id
        returning j.id, j.status`,
  );
  const statuses = new Map(rows.map((r) => [Number(r.id), r.status]));
  const unknown = ids.filter((id) => !statuses.has(id));
  if (unknown.length > 0) throw new InvalidFlowError(`no job with id ${unknown.slice(0, 5).join(", ")}`);
  return statuses;
}
