import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { endpointView, findEndpointRow, type WebhookDeps, type WebhookEndpointView } from "./endpoints.ts";

/** One of the ctx's tenant's endpoints (no secrets); 404 for another tenant's. */
export async function getWebhookEndpoint(
  deps: Pick<WebhookDeps, "database">,
  ctx: TenantCtx,
  input: { id: string },
): Promise<WebhookEndpointView> {
  return endpointView(await withDatabase(deps, ctx, (db) => findEndpointRow(db, ctx.tenantId, input.id)));
}
