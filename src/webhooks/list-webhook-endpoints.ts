import { and, desc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { webhookEndpoints } from "../db/schema/index.ts";
import { cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { endpointView, type WebhookDeps, type WebhookEndpointView } from "./endpoints.ts";

const endpointCursor = cursorCodec(z.object({ createdAt: z.iso.datetime(), id: z.uuid() }));

/**
 * The ctx's tenant's endpoints, newest first (no secrets), a page at a time. 404 for an unknown
 * tenant. The keyset compares creation times at the millisecond the cursor carries, on both sides.
 */
export async function listWebhookEndpoints(
  deps: Pick<WebhookDeps, "database">,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<WebhookEndpointView>> {
  const after = endpointCursor.decodeOptional(input.cursor);
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const createdMs = sql`date_trunc('milliseconds', ${webhookEndpoints.createdAt})`;
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select()
      .from(webhookEndpoints)
      .where(
        and(
          eq(webhookEndpoints.tenantId, ctx.tenantId),
          after
            ? sql`(${createdMs} < ${after.createdAt}::timestamptz or (${createdMs} = ${after.createdAt}::timestamptz and ${webhookEndpoints.id} > ${after.id}::uuid))`
            : undefined,
        ),
      )
      .orderBy(desc(createdMs), webhookEndpoints.id)
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    endpointView,
    (row) => ({ createdAt: row.createdAt.toISOString(), id: row.id }),
    endpointCursor,
  );
}
