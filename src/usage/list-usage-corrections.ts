import { and, desc, eq, lt } from "drizzle-orm";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { usageReconciliations } from "../db/schema/billing.ts";
import { idCursor, type Page, type PageRequest, pageById } from "../pagination.ts";
import type { UsageDeps } from "./counters.ts";

export type UsageCorrection = typeof usageReconciliations.$inferSelect;

/**
 * The ctx's tenant's counter corrections (reconciliation found a missing or drifted counter),
 * newest first.
 */
export async function listUsageCorrections(
  deps: Pick<UsageDeps, "database">,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<UsageCorrection>> {
  const after = idCursor.decodeOptional(input.cursor);
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select()
      .from(usageReconciliations)
      .where(
        and(
          eq(usageReconciliations.tenantId, ctx.tenantId),
          after ? lt(usageReconciliations.id, after.id) : undefined,
        ),
      )
      .orderBy(desc(usageReconciliations.id))
      .limit(input.limit + 1),
  );
  return pageById(rows, input.limit);
}
