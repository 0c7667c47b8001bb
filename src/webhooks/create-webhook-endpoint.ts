import { eq, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import type { Tx } from "../db/client.ts";
import { withTransaction } from "../db/operation.ts";
import { tenants, webhookEndpoints } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { writeTenantSecret } from "../providers/tenant-secret-store.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { countResource } from "../usage/record-usage.ts";
import {
  checkEvents,
  checkUrl,
  endpointView,
  keyring,
  secretName,
  urlOrigin,
  type WebhookDeps,
  type WebhookEndpointView,
} from "./endpoints.ts";
import { newSigningSecret } from "./signing.ts";

/** Locks the tenant's row and refuses (403) once it holds `limit` endpoints. */
async function assertUnderLimit(tx: Tx, tenantId: string, limit: number | null): Promise<void> {
  await tx.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).for("update");
  if (limit === null) return;
  const [held] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.tenantId, tenantId));
  if ((held?.n ?? 0) >= limit)
    throw new AppError(
      "usage_limit_reached",
      `The limit of "webhook_endpoints" (${limit} endpoints) is reached.`,
    );
}

/**
 * Registers an endpoint of the ctx's tenant and its signing secret (returned only here and on
 * rotation), with its usage and audit entry, in one transaction. The URL is checked against the
 * destination rules (400 naming the rule); the plan's `webhook_endpoints` limit holds under the
 * tenant's row lock (402 when the plan has none, 403 at the limit).
 */
export async function createWebhookEndpoint(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { url: string; events: string[]; description?: string },
): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
  const { tenantId } = ctx;
  const ring = keyring(deps);
  const events = checkEvents(input.events);
  const url = await checkUrl(deps, input.url);
  const { limit } = await assertFeature(deps, ctx, { feature: "webhook_endpoints" });
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const secret = newSigningSecret();
  const now = deps.clock.now();
  const row = await withTransaction(deps, ctx, async (tx, txCtx) => {
    await assertUnderLimit(tx, tenantId, limit);
    const [inserted] = await tx
      .insert(webhookEndpoints)
      .values({ tenantId, url, events, description: input.description ?? "", createdAt: now, updatedAt: now })
      .returning();
    if (!inserted) throw new Error("endpoint insert returned no row");
    await writeTenantSecret(tx, ring, tenantId, {
      name: secretName(inserted.id, "current"),
      value: secret,
      now,
    });
    await countResource(deps, txCtx, { feature: "webhook_endpoints", id: inserted.id, quantity: 1 });
    await recordAudit(tx, txCtx, {
      action: "webhook_endpoint.created",
      target: { type: "webhook_endpoint", id: inserted.id },
      details: { url: urlOrigin(inserted.url), events: inserted.events },
    });
    return inserted;
  });
  deps.logger.info("webhook endpoint added", { tenantId, endpointId: row.id });
  return { endpoint: endpointView(row), secret };
}
