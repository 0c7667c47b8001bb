import type { Clock } from "../clock.ts";
import type { Executor } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";
import { type JobLease, orphanedJobKinds, pruneJobs, releaseJobs } from "./queue.ts";

/**
 * One round of retention: deletes succeeded and dead jobs older than their retention, and warns
 * about unfinished jobs of kinds no process has handled for a lease or longer. Returns how many
 * jobs were deleted.
 */
export async function pruneFinishedJobs(
  deps: { db: Executor; clock: Clock; logger: Logger },
  input: { succeededMs: number; deadMs: number; kinds: string[]; leaseMs: number },
): Promise<number> {
  const now = deps.clock.now().getTime();
  const count = await pruneJobs(deps.db, {
    succeededBefore: new Date(now - input.succeededMs),
    deadBefore: new Date(now - input.deadMs),
  });
  if (count > 0) deps.logger.info("pruned finished jobs", { count });
  // jobs of kinds no process handles stay forever: say so (after a release dropped a kind)
  const orphaned = await orphanedJobKinds(deps.db, {
    kinds: input.kinds,
    before: new Date(now - input.leaseMs),
  });
  if (orphaned.length > 0)
    deps.logger.warn("unfinished jobs of kinds no process has handled for a lease or longer", {
      kinds: orphaned,
      hint: "a release dropped these kinds, or the process that handles them is down (docs/runbooks/switch-over.md)",
    });
  return count;
}

/**
 * Gives back runs still going at shutdown (their handlers were aborted): attempt not counted, due
 * at once. Returns the ids released, or null when the database failed (the leases run out instead).
 */
export async function releaseUnfinishedJobs(
  deps: { db: Executor; clock: Clock; logger: Logger },
  input: { workerId: string; jobs: JobLease[] },
): Promise<number[] | null> {
  try {
    const ids = await releaseJobs(deps.db, { ...input, now: deps.clock.now() });
    deps.logger.info("released unfinished jobs", { ids });
    return ids;
  } catch (error) {
    deps.logger.error("releasing jobs failed; they run again once their lease expires", { error });
    return null;
  }
}
