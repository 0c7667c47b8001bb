import { and, desc, eq, ne, sql } from "drizzle-orm";
import { z } from "zod";
import type { Ctx } from "../context.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import { tenantDomains, tenants } from "../db/schema/index.ts";
import { cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import type { DomainDeps } from "./domain-rows.ts";
import { type DomainView, domainView, type PlatformDomainView } from "./domain-view.ts";

const platformDomainCursor = cursorCodec(
  z.object({ createdAt: z.iso.datetime(), hostname: z.string(), id: z.uuid() }),
);

/**
 * Every tenant's custom domains, for platform staff, newest first: by state (`notActive`: Pending
 * and Failed together).
 */
export async function listPlatformCustomDomains(
  deps: Pick<DomainDeps, "database" | "config">,
  ctx: Ctx,
  input: PageRequest & { status?: DomainView["status"]; notActive?: boolean },
): Promise<Page<PlatformDomainView>> {
  const after = platformDomainCursor.decodeOptional(input.cursor);
  // the platform path: every tenant's domains, for platform staff
  const rows = await withPlatformDatabase(deps, ctx, (db) =>
    db
      .select({ domain: tenantDomains, tenantCode: tenants.code })
      .from(tenantDomains)
      .innerJoin(tenants, eq(tenants.id, tenantDomains.tenantId))
      .where(
        and(
          input.status
            ? eq(tenantDomains.status, input.status)
            : input.notActive
              ? ne(tenantDomains.status, "Active")
              : undefined,
          after
            ? sql`(${tenantDomains.createdAt} < ${after.createdAt}::timestamptz or (${tenantDomains.createdAt} = ${after.createdAt}::timestamptz and (${tenantDomains.hostname}, ${tenantDomains.id}) > (${after.hostname}, ${after.id}::uuid)))`
            : undefined,
        ),
      )
      .orderBy(desc(tenantDomains.createdAt), tenantDomains.hostname, tenantDomains.id)
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    (r) => ({ ...domainView(deps, r.domain), tenantCode: r.tenantCode }),
    (r) => ({ createdAt: r.domain.createdAt.toISOString(), hostname: r.domain.hostname, id: r.domain.id }),
    platformDomainCursor,
  );
}
