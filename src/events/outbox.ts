import { sql } from "drizzle-orm";
import { z } from "zod";
import { type Executor, execute } from "../db/client.ts";
import { type EnqueueContext, enqueueMany } from "../jobs/enqueue.ts";
import { jobKind } from "../jobs/registry.ts";

/** Every event type a tenant can subscribe to (`*` subscribes to all of them). */
export const webhookEventTypes = [
  "user.created",
  "user.disabled",
  "user.deleted",
  "passkey.registered",
  "passkey.removed",
  "invitation.created",
  "invitation.accepted",
  "invitation.revoked",
  "domain.activated",
  "domain.failed",
  "email_domain.verified",
  "email_domain.unverified",
  "sso_connection.created",
  "sso_connection.updated",
  "sso_connection.deleted",
  "subscription.changed",
  "usage.threshold_reached",
  "webhook.test",
  "webhook.endpoint_disabled",
  "mfa.enrolled",
  "mfa.removed",
  "mfa.backup_code_used",
  "mfa.reset",
] as const;
export type WebhookEventType = (typeof webhookEventTypes)[number];

/** The `data` of each event type (the OpenAPI document's `webhooks` section describes the same). */
export interface WebhookEventData {
  "user.created": { userId: string; email: string; role: string };
  "user.disabled": { userId: string };
  "user.deleted": { userId: string };
  "passkey.registered": { userId: string; passkeyId: string; name: string };
  "passkey.removed": { userId: string; passkeyId: string; name: string };
  "invitation.created": { invitationId: string; email: string; role: string };
  "invitation.accepted": { invitationId: string; userId: string; email: string; role: string };
  "invitation.revoked": { invitationId: string; email: string };
  "domain.activated": { domainId: string; hostname: string };
  "domain.failed": { domainId: string; hostname: string; code: string; reason: string };
  "email_domain.verified": { emailDomainId: string; domain: string };
  "email_domain.unverified": { emailDomainId: string; domain: string; code: string; reason: string };
  "sso_connection.created": { connectionId: string; type: string; enabled: boolean };
  "sso_connection.updated": { connectionId: string; type: string; enabled: boolean; fields: string[] };
  "sso_connection.deleted": { connectionId: string; type: string };
  "subscription.changed": {
    tenantId: string;
    subscriptionId: string;
    event: string;
    fromStatus: string | null;
    toStatus: string;
    fromPlan: string | null;
    toPlan: string;
    source: string;
  };
  "usage.threshold_reached": {
    feature: string;
    period: string;
    /** 80 or 100 (percent of the limit). */
    threshold: number;
    limit: number;
    used: number;
  };
  "webhook.test": { endpointId: string; message: string };
  "webhook.endpoint_disabled": { endpointId: string; url: string; failingSince: string; reason: string };
  "mfa.enrolled": { userId: string; method: string };
  "mfa.removed": { userId: string; method: string };
  "mfa.backup_code_used": { userId: string; remaining: number };
  "mfa.reset": { userId: string; removed: string[] };
}

export const DELIVER_KIND = "webhooks.deliver";
export const deliverPayload = z.object({
  deliveryId: z.uuid(),
  /** 1 for the first attempt. */
  attempt: z.number().int().positive(),
});
/** A delivery attempt's job runs again only if its process died (lease takeover), not on an HTTP failure. */
export const DELIVER_JOB_ATTEMPTS = 5;
/** The job kind of one delivery attempt; its handler is `deliverWorker` (src/webhooks/deliver.ts). */
export const deliverJob = jobKind(DELIVER_KIND, deliverPayload, { maxAttempts: DELIVER_JOB_ATTEMPTS });

export const deliveryDedupKey = (deliveryId: string, attempt: number) => `webhook:${deliveryId}:${attempt}`;

/** The clock (and job defaults) of the transaction an event is emitted in: an enqueue context. */
export type EventContext = EnqueueContext;

export interface EmitInput<T extends WebhookEventType> {
  tenantId: string;
  type: T;
  data: WebhookEventData[T];
}

/**
 * The transactional outbox: writes the event, one delivery per enabled endpoint of the tenant that
 * subscribes to its type, and each delivery's first attempt as a job, all on `tx` — the
 * transaction of the change that caused the event. Rolled back, nothing is sent; committed, every
 * delivery is a job the queue will run (a NOTIFY wakes the job loops on commit). `only` limits the
 * deliveries to one endpoint, whatever it subscribes to (the test event).
 */
export async function emitEvent<T extends WebhookEventType>(
  tx: Executor,
  ctx: EventContext,
  input: EmitInput<T>,
  options: { only?: string } = {},
): Promise<{ eventId: string; deliveryIds: string[] }> {
  const now = ctx.clock.now().toISOString();
  const rows = await execute<{ event_id: string; delivery_id: string | null }>(
    tx,
    sql`with event as (
          insert into webhook_events (tenant_id, type, data, occurred_at, created_at)
          values (${input.tenantId}, ${input.type}, ${JSON.stringify(input.data)}::jsonb, ${now}::timestamptz, ${now}::timestamptz)
          returning id
        ),
        deliveries as (
          insert into webhook_deliveries (tenant_id, endpoint_id, event_id, next_attempt_at, created_at, updated_at)
          select e.tenant_id, e.id, (select id from event), ${now}::timestamptz, ${now}::timestamptz, ${now}::timestamptz
          from webhook_endpoints e
          where e.tenant_id = ${input.tenantId}
            and ${
              options.only
                ? sql`e.id = ${options.only}`
                : sql`e.enabled and (${input.type} = any(e.events) or '*' = any(e.events))`
            }
          returning id
        )
        select (select id from event) as event_id, d.id as delivery_id
        from (select 1) one left join deliveries d on true`,
  );
  const eventId = rows[0]?.event_id;
  if (!eventId) throw new Error("the webhook event insert returned no row");
  const deliveryIds = rows.flatMap((r) => (r.delivery_id ? [r.delivery_id] : []));
  if (deliveryIds.length > 0)
    await enqueueMany(
      tx,
      ctx,
      deliveryIds.map((deliveryId) => ({
        job: deliverJob,
        payload: { deliveryId, attempt: 1 },
        options: {
          tenantId: input.tenantId,
          dedupKey: deliveryDedupKey(deliveryId, 1),
          maxAttempts: DELIVER_JOB_ATTEMPTS,
        },
      })),
    );
  return { eventId, deliveryIds };
}
