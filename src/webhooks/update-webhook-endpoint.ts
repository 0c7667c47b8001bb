import type { TenantCtx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import {
  checkEvents,
  checkUrl,
  endpointView,
  findEndpointRow,
  urlOrigin,
  type WebhookDeps,
  type WebhookEndpointView,
  writeEndpointChange,
} from "./endpoints.ts";

/**
 * Changes the URL (checked again), the event types, the description or `enabled` (enabling clears
 * the failure streak) of one of the ctx's tenant's endpoints, with its audit entry.
 */
export async function updateWebhookEndpoint(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string; url?: string; events?: string[]; enabled?: boolean; description?: string },
): Promise<WebhookEndpointView> {
  const url = input.url === undefined ? undefined : await checkUrl(deps, input.url);
  const events = input.events === undefined ? undefined : checkEvents(input.events);
  const now = deps.clock.now();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const current = await findEndpointRow(tx, ctx.tenantId, input.id, true);
    const enabling = input.enabled === true && !current.enabled;
    return writeEndpointChange(tx, txCtx, {
      id: current.id,
      set: {
        ...(url !== undefined ? { url } : {}),
        ...(events !== undefined ? { events } : {}),
        ...(input.description !== undefined ? { description: input.description } : {}),
        ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
        ...(enabling ? { disabledReason: null, disabledAt: null, failingSince: null } : {}),
        ...(input.enabled === false && current.enabled ? { disabledAt: now, disabledReason: null } : {}),
        updatedAt: now,
      },
      details: {
        url: url === undefined ? undefined : urlOrigin(url),
        events,
        status: input.enabled === undefined ? undefined : input.enabled ? "enabled" : "disabled",
      },
    });
  });
  return endpointView(row);
}
