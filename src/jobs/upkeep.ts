import type { Clock } from "../clock.ts";
import type { Executor } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";
import { pruneRateBuckets } from "./claim-rate.ts";
import { orphanedJobKinds, pruneJobs } from "./queue.ts";

/**
 * One round of retention: deletes succeeded and dead jobs older than their retention (and the
 * rate-limit buckets of keys idle for an hour), and warns
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
  // rate-limit buckets idle for an hour are full: the same as none
  await pruneRateBuckets(deps.db, new Date(now - 3_600_000));
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
