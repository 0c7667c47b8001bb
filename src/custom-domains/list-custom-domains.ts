import { and, desc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { tenantDomains } from "../db/schema/index.ts";
import { cursorCodec, type Page, pageOf } from "../pagination.ts";
import { getTenant } from "../tenancy/tenants.ts";
import type { DomainDeps } from "./domain-rows.ts";
import { type DomainView, domainView } from "./domain-view.ts";

const domainCursor = cursorCodec(z.object({ createdAt: z.iso.datetime(), hostname: z.string() }));

/**
 * The ctx's tenant's custom domains, newest first; every one of them unless `limit` is given. 404
 * for an unknown tenant.
 */
export async function listCustomDomains(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { limit?: number; cursor?: string } = {},
): Promise<Page<DomainView>> {
  const { tenantId } = ctx;
  const after = domainCursor.decodeOptional(input.cursor);
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const rows = await withDatabase(deps, ctx, (db) => {
    const query = db
      .select()
      .from(tenantDomains)
      .where(
        and(
          eq(tenantDomains.tenantId, tenantId),
          after
            ? sql`(${tenantDomains.createdAt} < ${after.createdAt}::timestamptz or (${tenantDomains.createdAt} = ${after.createdAt}::timestamptz and ${tenantDomains.hostname} > ${after.hostname}))`
            : undefined,
        ),
      )
      .orderBy(desc(tenantDomains.createdAt), tenantDomains.hostname)
      .$dynamic();
    return input.limit === undefined ? query : query.limit(input.limit + 1);
  });
  const view = (row: (typeof rows)[number]) => domainView(deps, row);
  if (input.limit === undefined) return { items: rows.map(view), nextCursor: null };
  return pageOf(
    rows,
    input.limit,
    view,
    (row) => ({ createdAt: row.createdAt.toISOString(), hostname: row.hostname }),
    domainCursor,
  );
}
