import { and, desc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { webhookEndpoints } from "../db/schema/index.ts";
import { cursorCodec, type Page, pageOf } from "../pagination.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { endpointView, type WebhookDeps, type WebhookEndpointView } from "./endpoints.ts";

const endpointCursor = cursorCodec(z.object({ createdAt: z.iso.datetime(), id: z.uuid() }));

/**
 * The ctx's tenant's endpoints, newest first (no secrets); every one of them unless `limit` is
 * given. 404 for an unknown tenant.
 */
export async function listWebhookEndpoints(
  deps: Pick<WebhookDeps, "database">,
  ctx: TenantCtx,
  input: { limit?: number; cursor?: string } = {},
): Promise<Page<WebhookEndpointView>> {
  const after = endpointCursor.decodeOptional(input.cursor);
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const rows = await withDatabase(deps, ctx, (db) => {
    const query = db
      .select()
      .from(webhookEndpoints)
      .where(
        and(
          eq(webhookEndpoints.tenantId, ctx.tenantId),
          after
            ? sql`(${webhookEndpoints.createdAt} < ${after.createdAt}::timestamptz or (${webhookEndpoints.createdAt} = ${after.createdAt}::timestamptz and ${webhookEndpoints.id} > ${after.id}::uuid))`
            : undefined,
        ),
      )
      .orderBy(desc(webhookEndpoints.createdAt), webhookEndpoints.id)
      .$dynamic();
    return input.limit === undefined ? query : query.limit(input.limit + 1);
  });
  if (input.limit === undefined) return { items: rows.map(endpointView), nextCursor: null };
  return pageOf(
    rows,
    input.limit,
    endpointView,
    (row) => ({ createdAt: row.createdAt.toISOString(), id: row.id }),
    endpointCursor,
  );
}
