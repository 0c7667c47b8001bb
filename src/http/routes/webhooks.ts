import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { webhookEventTypes } from "../../events/outbox.ts";
import { createWebhookEndpoint } from "../../webhooks/create-webhook-endpoint.ts";
import { deleteWebhookEndpoint } from "../../webhooks/delete-webhook-endpoint.ts";
import { listDeliveries, replayFailedDeliveries, retryDelivery } from "../../webhooks/deliveries.ts";
import { redactedDestination } from "../../webhooks/endpoints.ts";
import { getWebhookEndpoint } from "../../webhooks/get-webhook-endpoint.ts";
import { listWebhookEndpoints } from "../../webhooks/list-webhook-endpoints.ts";
import { rotateWebhookSecret } from "../../webhooks/rotate-webhook-secret.ts";
import { testWebhookEndpoint } from "../../webhooks/test-webhook-endpoint.ts";
import { updateWebhookEndpoint } from "../../webhooks/update-webhook-endpoint.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem, tenantIdParam } from "../openapi.ts";
import { adminCtxOf, createRouter, tenantCtxOf } from "../request-context.ts";
import { WEBHOOKS_ACTIONS } from "./webhooks-actions.ts";

const eventTypeList = z
  .array(z.enum(["*", ...webhookEventTypes]))
  .min(1)
  .max(50)
  .openapi({ description: `Event types delivered here, or \`*\` for all: ${webhookEventTypes.join(", ")}.` });

const endpointSchema = z
  .object({
    id: z.uuid(),
    tenantId: z.uuid(),
    url: z.string(),
    description: z.string(),
    events: z.array(z.string()),
    enabled: z.boolean(),
    disabledReason: z
      .string()
      .nullable()
      .openapi({ description: "Why Plinth disabled it (`Webhooks:DisableAfterDays` of failures)." }),
    disabledAt: z.string().nullable(),
    failingSince: z.string().nullable().openapi({ description: "Start of the current run of failures." }),
    previousSecretExpiresAt: z.string().nullable().openapi({
      description: "Until then, deliveries carry a second signature made with the previous secret.",
    }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("WebhookEndpoint");
const endpointWithSecret = z
  .object({
    endpoint: endpointSchema,
    secret: z.string().openapi({
      description:
        "The signing secret (`whsec_` + Base64): shown only in this answer. Verify with `standardwebhooks`.",
    }),
  })
  .openapi("WebhookEndpointSecret");
const endpointList = page(endpointSchema).openapi("WebhookEndpointList");
const newEndpoint = z
  .object({
    url: z.string().min(1).max(2000).openapi({
      format: "uri",
      example: "https://hooks.customer.example/plinth",
      description:
        "An absolute `https` URL (`http` only under `Webhooks:AllowPrivateDestinations`) whose host resolves to a public address.",
    }),
    events: eventTypeList,
    description: z.string().max(500).optional(),
  })
  .openapi("NewWebhookEndpoint");
const endpointChange = z
  .object({
    url: z.string().min(1).max(2000).optional().openapi({ format: "uri" }),
    events: eventTypeList.optional(),
    enabled: z.boolean().optional(),
    description: z.string().max(500).optional(),
  })
  .openapi("WebhookEndpointChange");
const attemptSchema = z
  .object({
    attempt: z.number().int(),
    statusCode: z.number().int().nullable().openapi({ description: "null when no answer came." }),
    durationMs: z.number().int(),
    errorClass: z.string().nullable().openapi({
      description:
        "null on success; `http_status`, `timeout`, `destination_refused`, `dns`, `tls`, `network`.",
    }),
    attemptedAt: z.string(),
  })
  .openapi("WebhookDeliveryAttempt");
const deliverySchema = z
  .object({
    id: z.uuid(),
    endpointId: z.uuid(),
    eventId: z.uuid(),
    eventType: z.string(),
    status: z.enum(["pending", "succeeded", "failed"]),
    attemptCount: z.number().int(),
    lastStatusCode: z.number().int().nullable(),
    lastErrorClass: z.string().nullable(),
    nextAttemptAt: z.string().nullable(),
    attempts: z.array(attemptSchema),
    createdAt: z.string(),
  })
  .openapi("WebhookDelivery");
const deliveryPage = page(deliverySchema).openapi("WebhookDeliveryPage");
const testSent = z.object({ eventId: z.uuid(), deliveryId: z.uuid() }).openapi("WebhookTestSent");
const replayInput = z
  .object({
    since: z.iso.datetime({ offset: true }).optional().openapi({
      description:
        "Failed deliveries created at or after this time; unset, every failed delivery still in the log.",
    }),
  })
  .openapi("WebhookReplay");
const replayed = z.object({ replayed: z.number().int() }).openapi("WebhookReplayed");

const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });
const deliveryParams = idParam.extend({
  deliveryId: z.string().openapi({ param: { name: "deliveryId", in: "path" } }),
});
const BASE = "/api/tenant/webhooks";
const tags = ["tenant"];
const notFound = problem("No such webhook endpoint.");
const limited = {
  402: problem("`payment_required`: the tenant's plan has no webhook endpoints."),
  403: problem(
    "`usage_limit_reached`: the plan's webhook endpoint limit is reached; or the caller's role may not.",
  ),
};

const create = apiRoute(
  tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }),
  {
    method: "post",
    path: BASE,
    operationId: "tenantCreateWebhookEndpoint",
    tags,
    summary: "Register a webhook endpoint: answers its signing secret, once.",
    request: { body: jsonBody(newEndpoint) },
    responses: {
      201: json("Registered.", endpointWithSecret),
      400: problem(
        "`validation_failed`: the URL is refused (the `errors` name the rule) or an event type is unknown.",
      ),
      ...limited,
    },
  },
  { location: true },
);
const list = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "get",
  path: BASE,
  operationId: "tenantListWebhookEndpoints",
  tags,
  summary: "List the tenant's webhook endpoints, newest first, a page at a time.",
  request: { query: z.object(pageQuery) },
  responses: { 200: json("The endpoints.", endpointList) },
});
const show = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "get",
  path: `${BASE}/{id}`,
  operationId: "tenantGetWebhookEndpoint",
  tags,
  summary: "Show a webhook endpoint.",
  request: { params: idParam },
  responses: { 200: json("The endpoint.", endpointSchema), 404: notFound },
});
const update = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "patch",
  path: `${BASE}/{id}`,
  operationId: "tenantUpdateWebhookEndpoint",
  tags,
  summary: "Change the URL, event types, description or `enabled` (enabling clears the failure streak).",
  request: { params: idParam, body: jsonBody(endpointChange) },
  responses: {
    200: json("The endpoint.", endpointSchema),
    400: problem(
      "`validation_failed`: the URL is refused (the `errors` name the rule) or an event type is unknown.",
    ),
    404: notFound,
  },
});
const remove = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "delete",
  path: `${BASE}/{id}`,
  operationId: "tenantDeleteWebhookEndpoint",
  tags,
  summary: "Remove a webhook endpoint, its secrets and its delivery log.",
  request: { params: idParam },
  responses: { 204: { description: "Removed." }, 404: notFound },
});
const rotate = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "post",
  path: `${BASE}/{id}/rotate-secret`,
  operationId: "tenantRotateWebhookSecret",
  tags,
  summary: "A new signing secret; the previous one keeps signing beside it for 24 hours.",
  request: { params: idParam },
  responses: { 200: json("The new secret, shown once.", endpointWithSecret), 404: notFound },
});
const sendTest = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "post",
  path: `${BASE}/{id}/test`,
  operationId: "tenantTestWebhookEndpoint",
  tags,
  summary: "Send a `webhook.test` event to this endpoint.",
  request: { params: idParam },
  responses: {
    202: json("Queued for delivery.", testSent),
    404: notFound,
    429: problem(
      "`rate_limited`: over the test sends of this endpoint (`webhooktest`) or of the tenant (`webhooktest-tenant`), `RateLimiting:WebhookTest`.",
    ),
  },
});
const deliveries = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "get",
  path: `${BASE}/{id}/deliveries`,
  operationId: "tenantListWebhookDeliveries",
  tags,
  summary: "The endpoint's delivery log, newest first: each attempt's status, duration and error class.",
  request: { params: idParam, query: z.object(pageQuery) },
  responses: { 200: json("A page of deliveries.", deliveryPage), 404: notFound },
});
const retry = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "post",
  path: `${BASE}/{id}/deliveries/{deliveryId}/retry`,
  operationId: "tenantRetryWebhookDelivery",
  tags,
  summary: "Send a finished delivery once more, now.",
  request: { params: deliveryParams },
  responses: {
    202: json("Queued.", deliverySchema),
    404: problem("No such delivery."),
    409: problem("The delivery is still pending."),
  },
});
const replay = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "webhooks:*" }), {
  method: "post",
  path: `${BASE}/{id}/replay`,
  operationId: "tenantReplayWebhookDeliveries",
  tags,
  summary: "Send again every failed delivery of the endpoint since a time.",
  request: { params: idParam, body: jsonBody(replayInput) },
  responses: { 202: json("How many were queued.", replayed), 404: notFound },
});
const adminList = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/webhooks",
  operationId: "adminListWebhookEndpoints",
  tags: ["admin"],
  summary:
    "A tenant's webhook endpoints (no secrets; each `url` without its `user:password@` part and with a query string shown as `?…`).",
  request: { params: tenantIdParam, query: z.object(pageQuery) },
  responses: { 200: json("The endpoints, URLs redacted.", endpointList), 404: problem("No such tenant.") },
});

/** Tenant owners and admins: their own endpoints (another tenant's id is a 404). */
export function tenantWebhookRoutes(deps: Deps) {
  return createRouter()
    .openapi(create, async (c) =>
      createWebhookEndpoint(deps, tenantCtxOf(c), c.req.valid("json")).then((created) =>
        c.json(created, 201, { location: `/api/tenant/webhooks/${created.endpoint.id}` }),
      ),
    )
    .openapi(list, async (c) => {
      return c.json(await listWebhookEndpoints(deps, tenantCtxOf(c), c.req.valid("query")), 200);
    })
    .openapi(show, async (c) =>
      c.json(await getWebhookEndpoint(deps, tenantCtxOf(c), { id: c.req.valid("param").id }), 200),
    )
    .openapi(update, async (c) =>
      c.json(
        await updateWebhookEndpoint(deps, tenantCtxOf(c), {
          id: c.req.valid("param").id,
          ...c.req.valid("json"),
        }),
        200,
      ),
    )
    .openapi(remove, async (c) => {
      await deleteWebhookEndpoint(deps, tenantCtxOf(c), { id: c.req.valid("param").id });
      return c.body(null, 204);
    })
    .openapi(rotate, async (c) =>
      c.json(await rotateWebhookSecret(deps, tenantCtxOf(c), { id: c.req.valid("param").id }), 200),
    )
    .openapi(sendTest, async (c) =>
      c.json(await testWebhookEndpoint(deps, tenantCtxOf(c), { id: c.req.valid("param").id }), 202),
    )
    .openapi(deliveries, async (c) => {
      const { limit, cursor } = c.req.valid("query");
      const endpointId = c.req.valid("param").id;
      return c.json(await listDeliveries(deps, tenantCtxOf(c), { endpointId, limit, cursor }), 200);
    })
    .openapi(retry, async (c) => {
      const { id, deliveryId } = c.req.valid("param");
      return c.json(await retryDelivery(deps, tenantCtxOf(c), { endpointId: id, deliveryId }), 202);
    })
    .openapi(replay, async (c) => {
      const given = c.req.valid("json").since;
      const since = given ? new Date(given) : new Date(0);
      const endpointId = c.req.valid("param").id;
      return c.json(await replayFailedDeliveries(deps, tenantCtxOf(c), { endpointId, since }), 202);
    });
}

/** Platform admin: a tenant's endpoints. Each declares `platform` access. */
export function adminWebhookRoutes(deps: Deps) {
  return createRouter().openapi(adminList, async (c) => {
    const { tenantId } = c.req.valid("param");
    const endpoints = await listWebhookEndpoints(deps, adminCtxOf(c, tenantId), c.req.valid("query"));
    // a platform admin sees where a tenant's events go, not the credentials in the URL
    const items = endpoints.items.map((e) => ({ ...e, url: redactedDestination(e.url) }));
    return c.json({ items, nextCursor: endpoints.nextCursor }, 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const webhooksArea = defineArea({
  name: "webhooks",
  routes: [tenantWebhookRoutes, adminWebhookRoutes],
  auditActions: WEBHOOKS_ACTIONS,
});
