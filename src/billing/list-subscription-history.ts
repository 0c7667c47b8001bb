import { and, desc, eq, lt } from "drizzle-orm";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { subscriptionHistory } from "../db/schema/billing.ts";
import { idCursor, type Page, type PageRequest, pageById } from "../pagination.ts";
import { getTenant } from "../tenancy/tenants.ts";
import type { BillingDeps } from "./billing-deps.ts";

export type SubscriptionHistoryEntry = typeof subscriptionHistory.$inferSelect;

/**
 * Every change of the ctx's tenant's subscription, newest first, keyset-paginated on the history
 * id. 404 for an unknown tenant.
 */
export async function listSubscriptionHistory(
  deps: Pick<BillingDeps, "database">,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<SubscriptionHistoryEntry>> {
  const before = idCursor.decodeOptional(input.cursor)?.id;
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select()
      .from(subscriptionHistory)
      .where(
        and(
          eq(subscriptionHistory.tenantId, ctx.tenantId),
          before ? lt(subscriptionHistory.id, before) : undefined,
        ),
      )
      .orderBy(desc(subscriptionHistory.id))
      .limit(input.limit + 1),
  );
  return pageById(rows, input.limit);
}
