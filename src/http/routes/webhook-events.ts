import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "@hono/zod-openapi";
import { webhookEventTypes } from "../../events/outbox.ts";
import { subscriptionChangeFields } from "./admin-billing.ts";

/** The `data` of each event type, as the deliveries carry it (the document's `webhooks` section). */
const eventData = {
  "user.created": z
    .object({ userId: z.uuid(), email: z.string(), role: z.string() })
    .openapi("UserCreatedEventData"),
  "user.disabled": z.object({ userId: z.uuid() }).openapi("UserDisabledEventData"),
  "user.deleted": z.object({ userId: z.uuid() }).openapi("UserDeletedEventData"),
  "passkey.registered": z
    .object({ userId: z.uuid(), passkeyId: z.uuid(), name: z.string() })
    .openapi("PasskeyRegisteredEventData"),
  "passkey.removed": z
    .object({ userId: z.uuid(), passkeyId: z.uuid(), name: z.string() })
    .openapi("PasskeyRemovedEventData"),
  "invitation.created": z
    .object({ invitationId: z.uuid(), email: z.string(), role: z.string() })
    .openapi("InvitationCreatedEventData"),
  "invitation.accepted": z
    .object({ invitationId: z.uuid(), userId: z.uuid(), email: z.string(), role: z.string() })
    .openapi("InvitationAcceptedEventData"),
  "invitation.revoked": z
    .object({ invitationId: z.uuid(), email: z.string() })
    .openapi("InvitationRevokedEventData"),
  "domain.activated": z
    .object({ domainId: z.uuid(), hostname: z.string() })
    .openapi("DomainActivatedEventData"),
  "domain.failed": z
    .object({ domainId: z.uuid(), hostname: z.string(), code: z.string(), reason: z.string() })
    .openapi("DomainFailedEventData"),
  "email_domain.verified": z
    .object({ emailDomainId: z.uuid(), domain: z.string() })
    .openapi("EmailDomainVerifiedEventData"),
  "email_domain.unverified": z
    .object({
      emailDomainId: z.uuid(),
      domain: z.string(),
      code: z
        .string()
        .openapi({ description: "What DNS answered: `dns_nxdomain`, `txt_missing`, `txt_mismatch`." }),
      reason: z.string(),
    })
    .openapi("EmailDomainUnverifiedEventData"),
  "sso_connection.created": z
    .object({ connectionId: z.uuid(), type: z.enum(["oidc", "saml"]), enabled: z.boolean() })
    .openapi("SsoConnectionCreatedEventData"),
  "sso_connection.updated": z
    .object({
      connectionId: z.uuid(),
      type: z.enum(["oidc", "saml"]),
      enabled: z.boolean(),
      fields: z.array(z.string()).openapi({ description: "The names of the fields changed." }),
    })
    .openapi("SsoConnectionUpdatedEventData"),
  "sso_connection.deleted": z
    .object({ connectionId: z.uuid(), type: z.enum(["oidc", "saml"]) })
    .openapi("SsoConnectionDeletedEventData"),
  "subscription.changed": z
    .object({
      tenantId: z.uuid(),
      subscriptionId: z.uuid(),
      ...subscriptionChangeFields,
    })
    .openapi("SubscriptionChangedEventData"),
  "usage.threshold_reached": z
    .object({
      feature: z.string(),
      period: z.string(),
      threshold: z.union([z.literal(80), z.literal(100)]),
      limit: z.number().int(),
      used: z.number().int(),
    })
    .openapi("UsageThresholdReachedEventData"),
  "webhook.test": z.object({ endpointId: z.uuid(), message: z.string() }).openapi("WebhookTestEventData"),
  "webhook.endpoint_disabled": z
    .object({ endpointId: z.uuid(), url: z.string(), failingSince: z.string(), reason: z.string() })
    .openapi("WebhookEndpointDisabledEventData"),
  "mfa.enrolled": z.object({ userId: z.uuid(), method: z.string() }).openapi("MfaEnrolledEventData"),
  "mfa.removed": z.object({ userId: z.uuid(), method: z.string() }).openapi("MfaRemovedEventData"),
  "mfa.backup_code_used": z
    .object({ userId: z.uuid(), remaining: z.number().int() })
    .openapi("MfaBackupCodeUsedEventData"),
  "mfa.reset": z.object({ userId: z.uuid(), removed: z.array(z.string()) }).openapi("MfaResetEventData"),
} satisfies Record<(typeof webhookEventTypes)[number], z.ZodType>;

const schemaName = (type: string) =>
  type
    .split(/[._]/)
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");

/**
 * The OpenAPI 3.1 `webhooks` section: one entry per event type, its body a named schema
 * (`{type, timestamp, data}`), with the Standard Webhooks headers.
 */
export function registerWebhookDocs(app: Pick<OpenAPIHono, "openAPIRegistry">): void {
  const header = (description: string) => z.string().openapi({ description });
  for (const type of webhookEventTypes) {
    const body = z
      .object({
        type: z.literal(type),
        timestamp: z.string().openapi({ description: "When the event happened (ISO 8601)." }),
        data: eventData[type],
      })
      .openapi(`${schemaName(type)}Event`);
    app.openAPIRegistry.registerWebhook({
      method: "post",
      path: type,
      operationId: `webhook${schemaName(type)}`,
      tags: ["webhooks"],
      // a receiver authenticates Plinth by the signature (webhook-signature), not by a scheme of this document
      security: [],
      summary: `The \`${type}\` event, POSTed to every enabled endpoint subscribed to it.`,
      request: {
        headers: z.object({
          "webhook-id": header(
            "The message id: the same on every attempt of a delivery (deduplicate on it).",
          ),
          "webhook-timestamp": header("Seconds since the epoch when this attempt was signed."),
          "webhook-signature": header(
            "`v1,<Base64 HMAC-SHA256 of id.timestamp.body>`; two, space-separated, during a secret rotation.",
          ),
        }),
        body: { required: true, content: { "application/json": { schema: body } } },
      },
      responses: {
        200: { description: "Any 2xx answer is a success." },
        400: {
          description:
            "Any other answer (a 4xx, 5xx, or a redirect, never followed), or none within `Webhooks:TimeoutSeconds`, is a failed attempt, retried after `Webhooks:RetrySeconds`.",
        },
      },
    });
  }
}
