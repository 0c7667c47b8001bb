import { z } from "zod";
import type { TenantCtx } from "../context.ts";
import { withDatabase } from "../db/operation.ts";
import { AppError, fieldErrors } from "../errors.ts";
import { resolveProvider } from "../providers/tenant-providers.ts";
import { readTenantSecret } from "../providers/tenant-secret-store.ts";
import type { TenantSecretKeyring } from "../security/tenant-secrets.ts";
import { isUuid } from "../tenancy/tenants.ts";
import { applySubscriptionEvent } from "./apply-subscription-event.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { eventSources, type SubscriptionEvent } from "./subscription-states.ts";
import { verifySignature } from "./webhook-signature.ts";

/** The secretRefs entry of a tenant's payment provider that names its webhook-signing secret. */
export const WEBHOOK_SECRET_REF = "webhookSecret";

export const webhookEvent = z.object({
  /** The provider's event id: a second delivery with the same id changes nothing. */
  id: z.string().min(1).max(200),
  type: z.enum(eventSources.webhook as [SubscriptionEvent, ...SubscriptionEvent[]]),
  plan: z.string().min(1).max(64).optional(),
  periodStart: z.iso.datetime({ offset: true }).optional(),
  periodEnd: z.iso.datetime({ offset: true }).optional(),
  subscriptionRef: z.string().max(200).optional(),
});

export interface PaymentWebhookDeps extends BillingDeps {
  tenantSecretKeyring: TenantSecretKeyring | null;
}

export interface PaymentWebhookInput {
  /** The body exactly as received: the signature covers these bytes. */
  rawBody: string;
  /** The `plinth-signature` header, if any. */
  signature: string | undefined;
}

export interface PaymentWebhookResult {
  applied: boolean;
  /** A second delivery of an event already applied: nothing changed. */
  duplicate: boolean;
  status: string;
}

/**
 * A payment provider's event for the ctx's tenant: verified with the tenant's own webhook secret
 * (its active payment provider's `webhookSecret` reference) before anything in the body is parsed,
 * then applied to the subscription. Every refusal of the signature is the same 401, logged with why.
 */
export async function receivePaymentWebhook(
  deps: PaymentWebhookDeps,
  ctx: TenantCtx,
  input: PaymentWebhookInput,
): Promise<PaymentWebhookResult> {
  const { tenantId } = ctx;
  const refuse = (reason: string) => {
    deps.logger.warn("payment webhook refused", { tenantId, reason });
    return new AppError("unauthorized", "The webhook signature is not valid.");
  };
  const keyring = deps.tenantSecretKeyring;
  if (!isUuid(tenantId)) throw refuse("not a tenant id");
  if (!keyring) throw refuse("tenant secrets are not configured");
  const secret = await withDatabase(deps, ctx, async (db) => {
    const resolved = await resolveProvider(db, tenantId, "payment", null);
    if (resolved?.source !== "tenant") throw refuse("no active payment provider");
    const secretName = resolved.provider.secretRefs[WEBHOOK_SECRET_REF];
    return secretName ? readTenantSecret(db, keyring, tenantId, secretName) : null;
  });
  if (!secret) throw refuse(`payment provider has no ${WEBHOOK_SECRET_REF} secret`);
  const check = verifySignature(
    input.signature,
    input.rawBody,
    secret,
    deps.clock.now(),
    deps.config.settings.SaasSubscriptions.WebhookToleranceSeconds,
  );
  if (!check.ok) throw refuse(check.reason);

  let json: unknown;
  try {
    json = JSON.parse(input.rawBody);
  } catch {
    throw new AppError("bad_request", "The body is not JSON.");
  }
  const parsed = webhookEvent.safeParse(json);
  if (!parsed.success)
    throw new AppError("validation_failed", "The event is not valid.", { fields: fieldErrors(parsed.error) });
  const event = parsed.data;
  const result = await applySubscriptionEvent(deps, ctx, {
    event: event.type,
    source: "webhook",
    plan: event.plan,
    periodStart: event.periodStart ? new Date(event.periodStart) : undefined,
    periodEnd: event.periodEnd ? new Date(event.periodEnd) : undefined,
    externalEventId: event.id,
    externalRef: event.subscriptionRef,
  });
  return { applied: result.changed, duplicate: !result.changed, status: result.subscription.status };
}
