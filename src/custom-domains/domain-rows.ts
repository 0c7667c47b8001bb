import { and, eq, ne } from "drizzle-orm";
import type { Executor } from "../db/client.ts";
import { tenantDomains } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { isUuid } from "../tenancy/tenants.ts";
import type { DomainRow } from "./domain-view.ts";

export type DomainDeps = Pick<Deps, "database" | "cache" | "clock" | "config" | "tenants" | "logger"> &
  Partial<Pick<Deps, "fetch">>;

/** The tenant's domain row; 404 when there is none (another tenant's id included). */
export async function findDomainRow(db: Executor, tenantId: string, id: string): Promise<DomainRow> {
  if (!isUuid(id) || !isUuid(tenantId)) throw new AppError("not_found", "No such domain.");
  const [row] = await db
    .select()
    .from(tenantDomains)
    .where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)));
  if (!row) throw new AppError("not_found", "No such domain.");
  return row;
}

/** Whether another tenant's claim on the row's hostname is Active. */
export async function activeElsewhere(db: Executor, row: { id: string; hostname: string }): Promise<boolean> {
  const [other] = await db
    .select({ id: tenantDomains.id })
    .from(tenantDomains)
    .where(
      and(
        eq(tenantDomains.hostname, row.hostname),
        eq(tenantDomains.status, "Active"),
        ne(tenantDomains.id, row.id),
      ),
    )
    .limit(1);
  return other !== undefined;
}

/** When a claim made or failed at `now` is removed: `TenantDomains:ClaimExpiryDays` later. */
export function claimExpiry(deps: Pick<DomainDeps, "config">, now: Date): Date {
  return new Date(now.getTime() + deps.config.settings.TenantDomains.ClaimExpiryDays * 86_400_000);
}
