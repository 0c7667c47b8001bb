import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { type DomainDeps, findDomainRow } from "./domain-rows.ts";
import { domainView, type PlatformDomainView } from "./domain-view.ts";

/** One of the ctx's tenant's custom domains with the tenant's code, for platform staff; 404 for an unknown tenant or domain. */
export async function getPlatformCustomDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<PlatformDomainView> {
  const tenant = await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const row = await withDatabase(deps, ctx, (db) => findDomainRow(db, tenant.id, input.id));
  return { ...domainView(deps, row), tenantCode: tenant.code };
}
