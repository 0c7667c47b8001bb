import { and, eq, inArray } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { tenantSecrets, webhookEndpoints } from "../db/schema/index.ts";
import { countResource } from "../usage/record-usage.ts";
import { findEndpointRow, secretName, urlOrigin, type WebhookDeps } from "./endpoints.ts";

/**
 * Removes one of the ctx's tenant's endpoints, its secrets and its delivery log, with its usage
 * and audit entry, in one transaction; pending attempts find nothing and stop.
 */
export async function deleteWebhookEndpoint(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<void> {
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    const row = await findEndpointRow(tx, ctx.tenantId, input.id, true);
    await tx.delete(webhookEndpoints).where(eq(webhookEndpoints.id, row.id));
    await tx
      .delete(tenantSecrets)
      .where(
        and(
          eq(tenantSecrets.tenantId, ctx.tenantId),
          inArray(tenantSecrets.name, [secretName(row.id, "current"), secretName(row.id, "previous")]),
        ),
      );
    await countResource(deps, txCtx, { feature: "webhook_endpoints", id: row.id, quantity: -1 });
    await recordAudit(tx, txCtx, {
      action: "webhook_endpoint.deleted",
      target: { type: "webhook_endpoint", id: row.id },
      details: { url: urlOrigin(row.url) },
    });
  });
  deps.logger.info("webhook endpoint removed", { tenantId: ctx.tenantId, endpointId: input.id });
}
