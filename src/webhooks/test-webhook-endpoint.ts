import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import { findEndpointRow, type WebhookDeps } from "./endpoints.ts";

/** Sends a `webhook.test` event to one of the ctx's tenant's endpoints (whatever it subscribes to). */
export async function testWebhookEndpoint(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<{ eventId: string; deliveryId: string }> {
  const row = await withDatabase(deps, ctx, (db) => findEndpointRow(db, ctx.tenantId, input.id));
  const { eventId, deliveryIds } = await withTransaction(deps, ctx, (tx) =>
    emitEvent(
      tx,
      enqueueContext(deps),
      {
        tenantId: ctx.tenantId,
        type: "webhook.test",
        data: { endpointId: row.id, message: "A test event sent from Plinth." },
      },
      { only: row.id },
    ),
  );
  const [deliveryId] = deliveryIds;
  if (!deliveryId) throw new AppError("not_found", "No such webhook endpoint.");
  return { eventId, deliveryId };
}
