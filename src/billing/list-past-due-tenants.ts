import { and, asc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { Ctx } from "../context.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import { subscriptions } from "../db/schema/billing.ts";
import { tenants } from "../db/schema/tenants.ts";
import { cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { graceEndsAt } from "./subscription-states.ts";

/** A tenant whose subscription is past due, and when its grace runs out (then it is suspended). */
export interface PastDueTenant {
  tenantId: string;
  tenantCode: string;
  planCode: string;
  pastDueSince: Date | null;
  graceEndsAt: Date | null;
}

const pastDueCursor = cursorCodec(z.object({ since: z.iso.datetime(), tenantId: z.uuid() }));

/**
 * Tenants past due, the oldest first, for platform staff. A past-due subscription always has
 * `past_due_since` (transition-plan.ts sets it), so the keyset is that time and the tenant id.
 */
export async function listPastDueTenants(
  deps: Pick<BillingDeps, "database" | "config">,
  ctx: Ctx,
  input: PageRequest,
): Promise<Page<PastDueTenant>> {
  const graceDays = deps.config.settings.SaasSubscriptions.PastDueGraceDays;
  const after = pastDueCursor.decodeOptional(input.cursor);
  // the platform path: a list across tenants, for platform staff
  const rows = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({
        tenantId: subscriptions.tenantId,
        tenantCode: tenants.code,
        planCode: subscriptions.planCode,
        pastDueSince: subscriptions.pastDueSince,
      })
      .from(subscriptions)
      .innerJoin(tenants, eq(tenants.id, subscriptions.tenantId))
      .where(
        and(
          eq(subscriptions.status, "past_due"),
          after
            ? sql`(${subscriptions.pastDueSince}, ${subscriptions.tenantId}) > (${after.since}::timestamptz, ${after.tenantId}::uuid)`
            : undefined,
        ),
      )
      .orderBy(asc(subscriptions.pastDueSince), asc(subscriptions.tenantId))
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    (r) => ({ ...r, graceEndsAt: r.pastDueSince ? graceEndsAt(r.pastDueSince, graceDays) : null }),
    (r) => ({ since: (r.pastDueSince ?? new Date(0)).toISOString(), tenantId: r.tenantId }),
    pastDueCursor,
  );
}
