import { recordAudit } from "../audit/record.ts";
import type { Settings } from "../config/schema.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import { findEndpointRow, urlOrigin, type WebhookDeps } from "./endpoints.ts";

/** The two limits of test sends, as `RateLimit-Policy` advertises them (docs/webhooks.md). */
export function testSendPolicies(
  settings: Settings,
): { name: string; limit: number; windowSeconds: number }[] {
  const { EndpointPermitLimit, TenantPermitLimit, WindowSeconds } = settings.RateLimiting.WebhookTest;
  return [
    { name: "webhooktest", limit: EndpointPermitLimit, windowSeconds: WindowSeconds },
    { name: "webhooktest-tenant", limit: TenantPermitLimit, windowSeconds: WindowSeconds },
  ];
}

/**
 * Takes one test send from the endpoint's bucket and from the tenant's (GCRA on the shared counter
 * store, as the request limits): a test send is an outbound POST to a URL the caller chose, so it is
 * bounded per endpoint and per tenant, not only by the caller's address. Over either: 429 naming it.
 * An unreachable store lets the send through (logged), as the request limits do.
 */
async function takeTestSend(
  deps: Pick<Deps, "counters" | "clock" | "logger" | "config">,
  ctx: TenantCtx,
  endpointId: string,
): Promise<void> {
  const [endpoint, tenant] = testSendPolicies(deps.config.settings);
  for (const [policy, bucket] of [
    [endpoint, `${ctx.tenantId}:${endpointId}`],
    [tenant, ctx.tenantId],
  ] as const) {
    if (!policy) continue;
    const nowMs = deps.clock.now().getTime();
    let outcome: Awaited<ReturnType<Deps["counters"]["rate"]>>[number] | undefined;
    try {
      [outcome] = await deps.counters.rate(
        `rl:${policy.name}:${bucket}`,
        policy.limit,
        policy.windowSeconds * 1000,
        nowMs,
        1,
      );
    } catch (error) {
      deps.logger.warn("rate-limit store unavailable; letting a webhook test send through", { error });
      return;
    }
    if (outcome && !outcome.allowed) {
      const retryAfter = Math.max(1, Math.ceil(outcome.retryAfterMs / 1000));
      throw new AppError(
        "rate_limited",
        `Too many test sends ${policy === endpoint ? "to this endpoint" : "for this tenant"}. Retry after ${retryAfter} s.`,
        { retryAfterSeconds: retryAfter, rateLimit: { policy: policy.name, resetSeconds: retryAfter } },
      );
    }
  }
}

/**
 * Sends a `webhook.test` event to one of the ctx's tenant's endpoints (whatever it subscribes to),
 * within the test-send limits (`RateLimiting:WebhookTest`, 429 over them).
 */
export async function testWebhookEndpoint(
  deps: WebhookDeps & Pick<Deps, "counters">,
  ctx: TenantCtx,
  input: { id: string },
): Promise<{ eventId: string; deliveryId: string }> {
  const row = await withDatabase(deps, ctx, (db) => findEndpointRow(db, ctx.tenantId, input.id));
  await takeTestSend(deps, ctx, row.id);
  const { eventId, deliveryIds } = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const emitted = await emitEvent(
      tx,
      enqueueContext(deps),
      {
        tenantId: ctx.tenantId,
        type: "webhook.test",
        data: { endpointId: row.id, message: "A test event sent from Plinth." },
      },
      { only: row.id },
    );
    // an outbound POST to a URL the caller chose: who asked for it is on the trail
    await recordAudit(tx, txCtx, {
      action: "webhook_endpoint.test_sent",
      target: { type: "webhook_endpoint", id: row.id },
      details: { url: urlOrigin(row.url), event: emitted.eventId },
    });
    return emitted;
  });
  const [deliveryId] = deliveryIds;
  if (!deliveryId) throw new AppError("not_found", "No such webhook endpoint.");
  return { eventId, deliveryId };
}
