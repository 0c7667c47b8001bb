import type { Ctx } from "../../context.ts";
import { AppError } from "../../errors.ts";
import { cancelJobs } from "./cancel-jobs.ts";
import { getFlow } from "./get-flow.ts";
import type { JobAdminDeps } from "./job-view.ts";

/**
 * Cancels every unfinished job of a flow (waiting, pending, failed, processing: running ones are
 * signalled), in the bulk cancel's batches; recorded as a bulk cancel with the flow id as its
 * filter. 404 for a flow with no jobs.
 */
export async function cancelFlow(
  deps: JobAdminDeps,
  ctx: Ctx,
  input: { flowId: string },
): Promise<{ changed: number }> {
  const found = await getFlow(deps, ctx, { flowId: input.flowId, limit: 1 });
  if (!found) throw new AppError("not_found", "No flow with this id.");
  return cancelJobs(deps, ctx, { flowId: input.flowId });
}
