import { and, desc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { tenantDomains } from "../db/schema/index.ts";
import { cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import { getTenant } from "../tenancy/tenants.ts";
import type { DomainDeps } from "./domain-rows.ts";
import { type DomainView, domainView } from "./domain-view.ts";

const domainCursor = cursorCodec(z.object({ createdAt: z.iso.datetime(), hostname: z.string() }));

/**
 * The ctx's tenant's custom domains, newest first, a page at a time. 404 for an unknown tenant.
 * The keyset compares creation times at the millisecond the cursor carries, on both sides.
 */
export async function listCustomDomains(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<DomainView>> {
  const { tenantId } = ctx;
  const after = domainCursor.decodeOptional(input.cursor);
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const createdMs = sql`date_trunc('milliseconds', ${tenantDomains.createdAt})`;
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select()
      .from(tenantDomains)
      .where(
        and(
          eq(tenantDomains.tenantId, tenantId),
          after
            ? sql`(${createdMs} < ${after.createdAt}::timestamptz or (${createdMs} = ${after.createdAt}::timestamptz and ${tenantDomains.hostname} > ${after.hostname}))`
            : undefined,
        ),
      )
      .orderBy(desc(createdMs), tenantDomains.hostname)
      .limit(input.limit + 1),
  );
  const view = (row: (typeof rows)[number]) => domainView(deps, row);
  return pageOf(
    rows,
    input.limit,
    view,
    (row) => ({ createdAt: row.createdAt.toISOString(), hostname: row.hostname }),
    domainCursor,
  );
}
