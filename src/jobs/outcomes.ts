import { type SQL, sql } from "drizzle-orm";
import { type Executor, executePrepared } from "../db/client.ts";
import { JOBS_CHANNEL } from "./enqueue.ts";
import { type JobLease, leaseIds, MAX_ERROR_LENGTH, ts } from "./queue.ts";

/**
 * A run's result as the queue records it: succeeded (the default), failed with the time it is due
 * again, dead, or released (given back at shutdown: the attempt not counted, due now). Every
 * result is written fenced on its lease.
 */
export type JobResult =
  /** `hasDependents`: the run's job had dependents when it was claimed (its fan-in is resolved here). */
  | (JobLease & { status?: "succeeded"; result?: unknown; hasDependents?: boolean })
  | (JobLease & { status: "failed"; runAfter: Date; error: string })
  /** `hasDependents`: as for a success (its children, which the trigger writes, are locked with it). */
  | (JobLease & { status: "dead"; error: string; hasDependents?: boolean })
  | (JobLease & { status: "released" });

/** A result as a row of the `lease` recordset; a success is its lease alone (most rows are). */
function rowOf(r: JobResult): Record<string, unknown> {
  const lease = { id: Math.trunc(r.id), attempts: r.attempts };
  if (r.status === "failed")
    return {
      ...lease,
      status: r.status,
      run_after: r.runAfter.toISOString(),
      error: r.error.slice(0, MAX_ERROR_LENGTH),
    };
  if (r.status === "dead") return { ...lease, status: r.status, error: r.error.slice(0, MAX_ERROR_LENGTH) };
  if (r.status === "released") return { ...lease, status: r.status };
  return r.result === undefined ? lease : { ...lease, result: r.result };
}

const succeeded = (r: JobResult) => r.status === undefined || r.status === "succeeded";

/** Whether `results` hold a success whose job had dependents when claimed (its batch needs the fan-in). */
export const needsFanIn = (results: JobResult[]) =>
  results.some((r) => succeeded(r) && "hasDependents" in r && r.hasDependents === true);

/**
 * The CTEs that record `results` for `workerId` (the start of a `with` list): `lease`, the results
 * as rows, and `done`, one update of all of them returning the ids it changed. Only a row still
 * `processing` under this worker and attempt changes: a run taken over by another worker, or
 * canceled by an admin, records nothing.
 *
 * The fan-in of successful parents (`resolvingCtes`) is built only with `fanIn` (default: a success
 * in `results` had dependents when claimed, `needsFanIn`): a plain drain's statement goes without
 * it (issue #35). `enqueueFlow` may give a running job children after its claim, so `done` checks
 * the row as it is at completion (an update re-reads a row another transaction changed once that
 * one commits) and refuses a success it would finish wrongly: without `fanIn`, one whose row has
 * dependents now; with it, one whose row has dependents and changed since this statement's
 * snapshot (children attached while the statement waited for the row: their edges are not in the
 * snapshot the fan-in reads). A refused success stays `processing` and is written again, with the
 * fan-in, by a statement of its own, whose snapshot has the edges (`recordResults`, and the
 * completer for outcomes a claim carried).
 *
 * Before it changes anything the statement locks, in one pass in id order (`locked`), every row it
 * will write: the results' rows and the unresolved children of those that may end here with
 * dependents (successes with the fan-in, dead ones through the trigger). `enqueueFlow` locks its
 * parents in id order too, so the two can never hold rows the other waits for (docs/jobs.md, "Lock
 * order"). A claim that carries results reads `done` before it claims (src/jobs/claim.ts).
 */
export function recordingCtes(input: {
  workerId: string;
  results: JobResult[];
  now: Date;
  fanIn?: boolean;
}): SQL {
  const now = ts(input.now);
  const fanIn = input.fanIn ?? needsFanIn(input.results);
  // the results whose children this statement may write: its successes' (fan-in), and its dead ones'
  // that had dependents when claimed (the trigger; a plain batch reads no edges, issue #35)
  const parents = input.results
    .filter((r) => (fanIn && succeeded(r)) || (r.status === "dead" && r.hasDependents === true))
    .map((r) => Math.trunc(r.id));
  const children =
    parents.length === 0
      ? sql``
      : sql` || array(select d.child_id from job_dependencies d
                         where d.parent_id = any(${`{${parents.join(",")}}`}::bigint[]) and not d.resolved)`;
  // one row and no children: no order to keep, and the lock pass costs (docs/performance.md, "Lock order")
  const lockFirst = input.results.length > 1 || parents.length > 0;
  return sql`lease as materialized (
          select l.id, l.attempts, coalesce(l.status, 'succeeded') as status, l.run_after, l.error, l.result
          from jsonb_to_recordset(${JSON.stringify(input.results.map(rowOf))}::jsonb)
            as l(id bigint, attempts int, status text, run_after timestamptz, error text, result jsonb)
        ),${
          lockFirst
            ? sql`
        locked as materialized (
          select j.id from background_jobs j
          where j.id = any(${`{${input.results.map((r) => Math.trunc(r.id)).join(",")}}`}::bigint[]${children})
          order by j.id
          for no key update
        ),`
            : sql``
        }
        done as (
          update background_jobs j
          set status = case when lease.status <> 'released' then lease.status
                            when j.attempts > 1 then 'failed' else 'pending' end,
              attempts = case when lease.status = 'released' then j.attempts - 1 else j.attempts end,
              run_after = case lease.status when 'released' then ${now} when 'failed' then lease.run_after
                               else j.run_after end,
              last_error = case when lease.status in ('failed', 'dead') then lease.error else j.last_error end,
              result = case when lease.status = 'succeeded' then lease.result else j.result end,
              finished_at = case when lease.status in ('succeeded', 'dead') then ${now}
                                 when lease.status = 'failed' then null else j.finished_at end,
              locked_by = null, locked_until = null, updated_at = ${now}
          from lease
          where j.id = lease.id and j.attempts = lease.attempts and ${leaseIds(input.results)}
            ${lockFirst ? sql`and j.id = any(array(select id from locked))` : sql``}
            and j.locked_by = ${input.workerId} and j.status = 'processing'
            and (lease.status <> 'succeeded' or not j.has_dependents
                 ${fanIn ? sql`or j.xmin = (select s.xmin from background_jobs s where s.id = j.id)` : sql``})
          returning j.id${fanIn ? sql`, j.status, j.has_dependents` : sql``}
        )${
          fanIn
            ? sql`,
        ${resolvingCtes(now)}`
            : sql``
        }`;
}

/**
 * The fan-in of the parents `done` finished successfully (dead and canceled parents go through
 * the trigger of drizzle/0018, drizzle/0023): their edges resolved, and each child counted down
 * once by the number of its parents finished here, not once per parent, so 10,000 parents of one
 * child cost an update of the child per completion batch. The children are already held (`locked`,
 * in id order with the parents): two workers finishing parents of the same children in any order
 * never deadlock. The `= any(array(…))` forms keep every read an index probe whatever the planner
 * thinks `done` holds.
 */
function resolvingCtes(now: SQL): SQL {
  return sql`resolved as (
          update job_dependencies d set resolved = true
          where d.parent_id = any(array(select id from done where has_dependents and status = 'succeeded'))
            and not d.resolved
          returning d.child_id
        ),
        counted as (
          update background_jobs c
          set waiting_on = c.waiting_on - k.n,
              status = case when c.status = 'waiting' and c.waiting_on <= k.n then 'pending' else c.status end,
              last_error = case when c.status = 'waiting' then null else c.last_error end,
              updated_at = ${now}
          from (select child_id, count(*)::int as n from resolved group by child_id) k
          where c.id = k.child_id and c.id = any(array(select child_id from resolved))
          -- a child that became due wakes the idle loops, as an enqueue does (one NOTIFY per commit)
          returning case when c.status = 'pending' and c.run_after <= ${now} then pg_notify(${JOBS_CHANNEL}, '') end
        )`;
}

/**
 * Records `results` in one statement (a second one, with the fan-in, for successes the first
 * refused or found lost: see `recordingCtes`). Returns the ids recorded now and, with `verify`
 * (results whose earlier write may have committed although its answer was lost), the ids already
 * in the state the result asked for by this attempt: recorded by that earlier write.
 */
export async function recordResults(
  db: Executor,
  input: { workerId: string; results: JobResult[]; now: Date; verify?: boolean },
): Promise<{ recorded: number[]; earlier: number[] }> {
  const first = await recordOnce(db, input);
  // a success `done` refused (it has dependents the statement could not resolve) or lost: once more
  // with the fan-in, in a snapshot of its own; what this records nothing of was lost
  const seen = new Set([...first.recorded, ...first.earlier]);
  const refused = input.results.filter((r) => succeeded(r) && !seen.has(Math.trunc(r.id)));
  if (refused.length === 0) return first;
  const again = await recordOnce(db, { ...input, results: refused, fanIn: true });
  return { recorded: [...first.recorded, ...again.recorded], earlier: [...first.earlier, ...again.earlier] };
}

async function recordOnce(
  db: Executor,
  input: { workerId: string; results: JobResult[]; now: Date; verify?: boolean; fanIn?: boolean },
): Promise<{ recorded: number[]; earlier: number[] }> {
  if (input.results.length === 0) return { recorded: [], earlier: [] };
  // every CTE reads the statement's snapshot: a row `done` changes now is still processing there
  const earlier = input.verify
    ? sql`, earlier as (
          select j.id from background_jobs j join lease on j.id = lease.id and j.attempts = lease.attempts
          where ${leaseIds(input.results)} and lease.status <> 'released' and j.status = lease.status
            and j.locked_by is null
        )`
    : sql``;
  if (!input.verify) {
    const rows = await executePrepared<{ id: string | number }>(
      db,
      sql`with ${recordingCtes(input)} select id from done`,
    );
    return { recorded: rows.map((r) => Number(r.id)), earlier: [] };
  }
  const rows = await executePrepared<{ part: "done" | "earlier"; id: string | number }>(
    db,
    sql`with ${recordingCtes(input)}${earlier}
        select 'done' as part, id from done union all select 'earlier', id from earlier`,
  );
  const out = { recorded: [] as number[], earlier: [] as number[] };
  for (const r of rows) (r.part === "done" ? out.recorded : out.earlier).push(Number(r.id));
  return out;
}

/** Marks runs succeeded; returns the ids actually updated (a run whose lease was taken over is not). */
export async function completeJobs(
  db: Executor,
  input: { workerId: string; jobs: JobLease[]; now: Date },
): Promise<number[]> {
  const results = input.jobs.map((j) => ({ id: j.id, attempts: j.attempts }));
  return (await recordResults(db, { workerId: input.workerId, results, now: input.now })).recorded;
}

export interface FailInput {
  workerId: string;
  job: JobLease;
  now: Date;
  /** Already redacted and bounded (see `describeJobError`). */
  error: string;
  /** null: no retry, the job is dead. */
  retryAt: Date | null;
}

/** Records a failed run: `failed` with a retry time, or `dead`. False when the lease was lost. */
export async function failJob(db: Executor, input: FailInput): Promise<boolean> {
  const { id, attempts } = input.job;
  const result: JobResult = input.retryAt
    ? { id, attempts, status: "failed", runAfter: input.retryAt, error: input.error }
    : { id, attempts, status: "dead", error: input.error };
  const { recorded } = await recordResults(db, {
    workerId: input.workerId,
    results: [result],
    now: input.now,
  });
  return recorded.length > 0;
}

/**
 * Gives runs back without counting them (shutdown): due at once, lock cleared, attempts as before
 * the claim, so another process takes them immediately.
 */
export async function releaseJobs(
  db: Executor,
  input: { workerId: string; jobs: JobLease[]; now: Date },
): Promise<number[]> {
  const results = input.jobs.map((j): JobResult => ({ id: j.id, attempts: j.attempts, status: "released" }));
  return (await recordResults(db, { workerId: input.workerId, results, now: input.now })).recorded;
}
