import { z } from "@hono/zod-openapi";
import { receivePaymentWebhook, webhookEvent } from "../../billing/payment-webhooks.ts";
import { SIGNATURE_HEADER } from "../../billing/webhook-signature.ts";
import type { Deps } from "../../deps.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, problem, tenantIdParam } from "../openapi.ts";
import { anonymousCtxOf, createRouter } from "../request-context.ts";

const webhook = apiRoute("public", {
  method: "post",
  path: "/api/webhooks/payments/{tenantId}",
  operationId: "receivePaymentWebhook",
  tags: ["billing"],
  summary:
    "Payment-provider webhook: `plinth-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<raw body>'>` with the tenant's payment webhook secret.",
  parameters: [
    {
      name: SIGNATURE_HEADER,
      in: "header",
      required: true,
      description:
        "`t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<raw body>'>`, with the tenant's `webhookSecret`.",
      schema: { type: "string", pattern: "^t=\\d+,v1=[0-9a-f]+" },
    },
  ],
  request: {
    params: tenantIdParam,
    // documented, not validated here: the domain verifies the signature over the raw body before parsing it
    body: {
      required: true,
      content: { "application/json": { schema: { $ref: "#/components/schemas/PaymentEvent" } } },
    },
  },
  responses: {
    200: json(
      "Applied, or a duplicate delivery (nothing changed).",
      z
        .object({ applied: z.boolean(), duplicate: z.boolean(), status: z.string() })
        .openapi("PaymentWebhookResult"),
    ),
    400: problem("The body is not a valid event."),
    401: problem("Missing, stale or wrong signature (or no payment provider for the tenant)."),
    409: problem("The subscription's state does not accept this event."),
  },
});

/** Payment-provider webhooks: the raw body and signature go to the domain, which verifies before parsing. */
export function paymentWebhookRoutes(deps: Deps) {
  const router = createRouter();
  router.openAPIRegistry.register("PaymentEvent", webhookEvent);
  return router.openapi(webhook, async (c) => {
    const { tenantId } = c.req.valid("param");
    const rawBody = await c.req.text();
    const result = await receivePaymentWebhook(
      deps,
      { ...anonymousCtxOf(c, tenantId), tenantId },
      { rawBody, signature: c.req.header(SIGNATURE_HEADER) },
    );
    return c.json(result, 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const paymentWebhooksArea = defineArea({ name: "payment-webhooks", routes: [paymentWebhookRoutes] });
