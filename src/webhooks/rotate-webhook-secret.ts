import { requireRecentSecondFactor } from "../auth/step-up.ts";
import type { TenantCtx } from "../context.ts";
import { withTransaction } from "../db/operation.ts";
import { readTenantSecret, writeTenantSecret } from "../providers/tenant-secret-store.ts";
import {
  endpointView,
  findEndpointRow,
  keyring,
  ROTATION_OVERLAP_MS,
  secretName,
  type WebhookDeps,
  type WebhookEndpointView,
  writeEndpointChange,
} from "./endpoints.ts";
import { newSigningSecret } from "./signing.ts";

/**
 * A new signing secret for one of the ctx's tenant's endpoints (returned once); the previous one
 * keeps signing beside it for 24 hours, so receivers can switch without losing a delivery.
 */
export async function rotateWebhookSecret(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
  await requireRecentSecondFactor(deps, ctx);
  const secret = newSigningSecret();
  const now = deps.clock.now();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const current = await findEndpointRow(tx, ctx.tenantId, input.id, true);
    const ring = keyring(deps);
    const old = await readTenantSecret(tx, ring, ctx.tenantId, secretName(current.id, "current"));
    if (old)
      await writeTenantSecret(tx, ring, ctx.tenantId, {
        name: secretName(current.id, "previous"),
        value: old,
        now,
      });
    await writeTenantSecret(tx, ring, ctx.tenantId, {
      name: secretName(current.id, "current"),
      value: secret,
      now,
    });
    return writeEndpointChange(tx, txCtx, {
      id: current.id,
      set: { previousSecretExpiresAt: new Date(now.getTime() + ROTATION_OVERLAP_MS), updatedAt: now },
      details: { reason: "signing secret rotated" },
    });
  });
  deps.logger.info("webhook secret rotated", { tenantId: ctx.tenantId, endpointId: row.id });
  return { endpoint: endpointView(row), secret };
}
