import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { type DomainDeps, findDomainRow } from "./domain-rows.ts";
import { type DomainView, domainView } from "./domain-view.ts";

/** One of the ctx's tenant's custom domains; 404 for another tenant's. */
export async function getCustomDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<DomainView> {
  return domainView(deps, await withDatabase(deps, ctx, (db) => findDomainRow(db, ctx.tenantId, input.id)));
}
