import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { tenantDomains } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { type DomainDeps, findDomainRow } from "./domain-rows.ts";
import { type DomainView, domainView } from "./domain-view.ts";

/**
 * Makes the domain due at the loop's next tick, whatever its backoff (a domain another process
 * is checking right now keeps its lease). An Active domain is re-checked only while its
 * certificate is not issued: the loop refreshes the TLS status, it never un-activates.
 */
export async function checkCustomDomain(
  deps: DomainDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<DomainView> {
  const { tenantId } = ctx;
  const { id } = input;
  await withDatabase(deps, ctx, (db) => findDomainRow(db, tenantId, id));
  const now = deps.clock.now();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const [updated] = await tx
      .update(tenantDomains)
      .set({ nextCheckAt: now, updatedAt: now })
      .where(and(eq(tenantDomains.id, id), eq(tenantDomains.tenantId, tenantId)))
      .returning();
    if (!updated) throw new AppError("not_found", "No such domain.");
    await recordAudit(tx, txCtx, {
      action: "domain.check_requested",
      target: { type: "domain", id },
      details: { hostname: updated.hostname },
    });
    return updated;
  });
  return domainView(deps, row);
}
