import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withPlatformDatabase, withTransaction } from "../db/operation.ts";
import { tenantDomains } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { countResource } from "../usage/record-usage.ts";
import { activeElsewhere, type DomainDeps, findDomainRow } from "./domain-rows.ts";
import type { DomainRow } from "./domain-view.ts";
import { gatewayClient } from "./settings.ts";

/** Takes the domain off the TLS gateway, unless the entry now serves the tenant that owns the name. */
async function removeFromGateway(deps: DomainDeps, row: DomainRow, elsewhere: boolean): Promise<void> {
  const gateway = elsewhere
    ? null
    : gatewayClient(deps.config.settings.TenantDomains, deps.logger, deps.fetch);
  if (gateway) {
    try {
      await gateway.remove({ id: row.gatewayHostnameId, hostname: row.hostname });
    } catch (error) {
      deps.logger.warn("tenant domain not removed: the gateway did not confirm", {
        domainId: row.id,
        error: (error as Error).message,
      });
      throw new AppError("unavailable", "The TLS gateway did not confirm the removal; try again.");
    }
  } else if (row.gatewayHostnameId && !elsewhere) {
    deps.logger.warn("tenant domain removed without a configured gateway: remove it there by hand", {
      domainId: row.id,
      hostname: row.hostname,
      gatewayHostnameId: row.gatewayHostnameId,
    });
  }
}

/**
 * Removes the domain from the TLS gateway, then from the database with its −1 of `custom_domains`
 * usage and its audit entry in one transaction (so a gateway outage leaves it in place to retry:
 * 503). Without a configured gateway only the record goes, with a warning when it had been
 * registered.
 */
export async function deleteCustomDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<void> {
  const { tenantId } = ctx;
  const id = input.id;
  const row = await withDatabase(deps, ctx, (db) => findDomainRow(db, tenantId, id));
  // whether another tenant's claim holds the name: a platform lookup (a yes or no, nothing of its rows)
  const elsewhere = await withPlatformDatabase(deps, ctx, (db) => activeElsewhere(db, row));
  await removeFromGateway(deps, row, elsewhere);
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    await tx.delete(tenantDomains).where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)));
    await countResource(deps, txCtx, { feature: "custom_domains", id: id, quantity: -1 });
    await recordAudit(tx, txCtx, {
      action: "domain.removed",
      target: { type: "domain", id },
      details: { hostname: row.hostname },
    });
  });
  deps.tenants.clear();
  deps.logger.info("tenant domain removed", { tenantId, domainId: id, hostname: row.hostname });
}
