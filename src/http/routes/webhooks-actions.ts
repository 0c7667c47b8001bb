import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `webhooksArea` declares (webhooks.ts): docs/audit.md's rows for them. */
export const WEBHOOKS_ACTIONS = {
  "webhook_endpoint.created": {
    what: "A webhook endpoint was added.",
    target: "`webhook_endpoint`",
    details: "`url` (scheme, host and port only: a path may hold a token), `events`",
    writtenBy: "`createWebhookEndpoint`",
  },
  "webhook_endpoint.updated": {
    what: "A webhook endpoint was changed, its secret rotated, or it was disabled for failing.",
    target: "`webhook_endpoint`",
    details:
      "what changed: `url`, `events`, `status` (`enabled`, `disabled`); `reason: signing secret rotated`; `status: disabled` with the `reason` when the delivery job disables a failing endpoint",
    writtenBy: "`updateWebhookEndpoint`, `rotateWebhookSecret`, the delivery job (actor: system `webhooks`)",
  },
  "webhook_endpoint.deleted": {
    what: "A webhook endpoint was deleted.",
    target: "`webhook_endpoint`",
    details: "`url` (origin)",
    writtenBy: "`deleteWebhookEndpoint`",
  },
  "webhook_endpoint.test_sent": {
    what: "A test event was sent to a webhook endpoint (an outbound POST to the tenant's URL).",
    target: "`webhook_endpoint`",
    details: "`url` (origin), `event` (the test event's id)",
    writtenBy: "`testWebhookEndpoint` (within `RateLimiting:WebhookTest`)",
  },
  "webhook_delivery.retried": {
    what: "A finished webhook delivery was sent once more.",
    target: "`webhook_delivery`",
    details: "`attempts` (the attempt queued), `event` (the event type)",
    writtenBy: "`retryDelivery`",
  },
  "webhook_endpoint.replayed": {
    what: "An endpoint's failed deliveries were queued again.",
    target: "`webhook_endpoint`",
    details: "`count` (deliveries queued), `from` (the `since` asked; the epoch when none)",
    writtenBy: "`replayFailedDeliveries`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
