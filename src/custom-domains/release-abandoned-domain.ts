import { and, eq } from "drizzle-orm";
import { withPlatformDatabase } from "../db/operation.ts";
import { tenantDomains } from "../db/schema/index.ts";
import type { ClaimedDomain } from "./claim-due-domains.ts";
import type { DomainCheck } from "./domain-check.ts";

/**
 * The domain was deleted while the check registered it with the gateway: take it off the gateway
 * again, unless another process took the row over or the entry serves the tenant that owns the name.
 */
export async function releaseAbandonedDomain(
  check: DomainCheck,
  domain: ClaimedDomain,
  gatewayId: string,
): Promise<void> {
  const { deps } = check;
  // the name's Active claim may be another tenant's: a platform lookup
  const keep = await withPlatformDatabase(deps, check.ctx, async (db) => {
    const [row] = await db
      .select({ id: tenantDomains.id })
      .from(tenantDomains)
      .where(eq(tenantDomains.id, domain.id));
    if (row) return true; // another process took over after our lease ran out; it owns the result
    const [owner] = await db
      .select({ id: tenantDomains.id })
      .from(tenantDomains)
      .where(and(eq(tenantDomains.hostname, domain.hostname), eq(tenantDomains.status, "Active")));
    return owner !== undefined; // the entry serves the tenant that owns the name
  });
  if (keep) return;
  await check.services.gateway.remove({ id: gatewayId, hostname: domain.hostname }).catch((error: unknown) =>
    deps.logger.warn("could not remove the gateway entry of a deleted domain", {
      hostname: domain.hostname,
      error: (error as Error).message,
    }),
  );
}
