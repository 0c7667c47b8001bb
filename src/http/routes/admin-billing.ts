import { z } from "@hono/zod-openapi";
import { applySubscriptionEvent } from "../../billing/apply-subscription-event.ts";
import { deleteFeatureOverride } from "../../billing/delete-feature-override.ts";
import { getSubscription } from "../../billing/get-subscription.ts";
import { getTenantFeatures } from "../../billing/get-tenant-features.ts";
import { listSubscriptionHistory } from "../../billing/list-subscription-history.ts";
import type { Subscription } from "../../billing/subscription-row.ts";
import { eventSources, graceEndsAt, type SubscriptionEvent } from "../../billing/subscription-states.ts";
import { updateFeatureOverride } from "../../billing/update-feature-override.ts";
import { getUsageReport } from "../../billing/usage-report.ts";
import { isoOrNull } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, pageQuery, problem, tenantIdParam } from "../openapi.ts";
import { adminCtxOf, createRouter } from "../request-context.ts";
import { BILLING_ACTIONS } from "./admin-billing-actions.ts";
import { featuresSchema, featuresView } from "./tenant-features.ts";

const subscriptionSchema = z
  .object({
    id: z.string(),
    tenantId: z.string(),
    plan: z.string(),
    status: z.enum(["trialing", "active", "past_due", "suspended", "canceled"]),
    currentPeriodStart: z.string(),
    currentPeriodEnd: z.string().nullable(),
    pastDueSince: z.string().nullable(),
    graceEndsAt: z.string().nullable(),
    suspendedAt: z.string().nullable(),
    canceledAt: z.string().nullable(),
    externalRef: z.string().nullable(),
    version: z.number(),
  })
  .openapi("Subscription");

function subscriptionView(deps: Deps, s: Subscription) {
  return {
    id: s.id,
    tenantId: s.tenantId,
    plan: s.planCode,
    status: s.status,
    currentPeriodStart: s.currentPeriodStart.toISOString(),
    currentPeriodEnd: isoOrNull(s.currentPeriodEnd),
    pastDueSince: isoOrNull(s.pastDueSince),
    graceEndsAt:
      s.status === "past_due" && s.pastDueSince
        ? graceEndsAt(s.pastDueSince, deps.config.settings.SaasSubscriptions.PastDueGraceDays).toISOString()
        : null,
    suspendedAt: isoOrNull(s.suspendedAt),
    canceledAt: isoOrNull(s.canceledAt),
    externalRef: s.externalRef,
    version: s.version,
  };
}

const featureKeyParam = tenantIdParam.extend({
  featureKey: z.string().openapi({ param: { name: "featureKey", in: "path" } }),
});

const getSub = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/subscription",
  operationId: "adminGetSubscription",
  tags: ["admin", "billing"],
  summary: "The tenant's current subscription (null: none yet, the default plan applies).",
  request: { params: tenantIdParam },
  responses: {
    200: json(
      "The subscription.",
      z.object({ subscription: subscriptionSchema.nullable() }).openapi("SubscriptionState"),
    ),
    404: problem("No such tenant."),
  },
});

const changeSub = apiRoute("platform", {
  method: "post",
  path: "/api/admin/tenants/{tenantId}/subscription/events",
  operationId: "adminApplySubscriptionEvent",
  tags: ["admin", "billing"],
  summary: "Apply an event to the tenant's subscription (see docs/billing.md for the transition table).",
  request: {
    params: tenantIdParam,
    body: jsonBody(
      z
        .object({
          event: z.enum(eventSources.admin as [SubscriptionEvent, ...SubscriptionEvent[]]),
          plan: z
            .string()
            .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "not a plan code")
            .optional()
            .openapi({
              description:
                "A plan code of the catalog (`GET /api/plans` lists the public ones). The catalog is data — the built-in `free`, `pro` and `enterprise`, and any plan an operator adds — so the document gives the form of a code, not the list: a code of no plan (or of the system plan `suspended`) is a 400 naming `plan`, and so is a free plan for `start_trial`. Required for `change_plan`.",
              example: "pro",
            }),
          periodStart: z.iso.datetime({ offset: true }).optional(),
          periodEnd: z.iso.datetime({ offset: true }).optional(),
          reason: z.string().max(500).optional(),
        })
        .openapi("SubscriptionEventRequest"),
    ),
  },
  responses: {
    200: json(
      "The subscription after the event.",
      z.object({ subscription: subscriptionSchema }).openapi("SubscriptionChange"),
    ),
    400: problem("Unknown plan or invalid body."),
    404: problem("No such tenant."),
    409: problem("The subscription's state does not accept this event."),
  },
});

/** What changed in a subscription: in its history and in the `subscription.changed` event. */
export const subscriptionChangeFields = {
  event: z.string(),
  fromStatus: z.string().nullable(),
  toStatus: z.string(),
  fromPlan: z.string().nullable(),
  toPlan: z.string(),
  source: z.string(),
};

const historySchema = z
  .object({
    items: z.array(
      z.object({
        id: z.number(),
        ...subscriptionChangeFields,
        actorId: z.string().nullable(),
        externalEventId: z.string().nullable(),
        reason: z.string(),
        occurredAt: z.string(),
      }),
    ),
    nextCursor: z
      .string()
      .nullable()
      .openapi({ description: "Pass as `cursor` for the next page; null on the last page." }),
  })
  .openapi("SubscriptionHistory");

const history = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/subscription/history",
  operationId: "adminGetSubscriptionHistory",
  tags: ["admin", "billing"],
  summary: "Every change of the tenant's subscription, newest first.",
  request: {
    params: tenantIdParam,
    query: z.object(pageQuery),
  },
  responses: {
    200: json("History entries.", historySchema),
    404: problem("No such tenant."),
  },
});

const adminFeatures = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/features",
  operationId: "adminGetFeatures",
  tags: ["admin", "billing"],
  summary: "The tenant's effective features (plan + overrides; the suspended set while suspended).",
  request: { params: tenantIdParam },
  responses: {
    200: json("Effective features.", featuresSchema),
    404: problem("No such tenant."),
  },
});

const putOverride = apiRoute("platform", {
  method: "put",
  path: "/api/admin/tenants/{tenantId}/features/{featureKey}/override",
  operationId: "adminPutFeatureOverride",
  tags: ["admin", "billing"],
  summary: "Override one feature for the tenant (replaces the plan's entry; ignored while suspended).",
  request: {
    params: featureKeyParam,
    body: jsonBody(
      z
        .object({
          enabled: z.boolean(),
          limit: z.number().int().min(0).nullable().default(null),
          reason: z.string().max(500).default(""),
        })
        .openapi("FeatureOverride"),
    ),
  },
  responses: {
    204: { description: "Stored; the tenant's cached features are dropped." },
    404: problem("No such tenant or feature."),
  },
});

const deleteOverride = apiRoute("platform", {
  method: "delete",
  path: "/api/admin/tenants/{tenantId}/features/{featureKey}/override",
  operationId: "adminDeleteFeatureOverride",
  tags: ["admin", "billing"],
  summary: "Remove the tenant's override of one feature.",
  request: { params: featureKeyParam },
  responses: {
    204: { description: "Removed." },
    404: problem("No such tenant, feature or override."),
  },
});

const usageSchema = z
  .object({
    items: z.array(
      z.object({
        feature: z.string(),
        period: z.string(),
        used: z.number(),
        cached: z.number().nullable(),
        limit: z.number().nullable(),
        enabled: z.boolean(),
      }),
    ),
    corrections: z.array(
      z.object({
        feature: z.string(),
        periodStart: z.string(),
        ledgerTotal: z.number(),
        cachedBefore: z.number().nullable(),
        reason: z.string(),
        correctedAt: z.string(),
      }),
    ),
  })
  .openapi("UsageReport");

const usageRoute = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/usage",
  operationId: "adminGetUsage",
  tags: ["admin", "billing"],
  summary: "Current-period usage per metered feature (ledger and cached counter) and recent corrections.",
  request: { params: tenantIdParam },
  responses: {
    200: json("Usage.", usageSchema),
    404: problem("No such tenant."),
  },
});

/** Platform admin: a tenant's subscription, history, features and usage. */
export function adminBillingRoutes(deps: Deps) {
  return createRouter()
    .openapi(getSub, async (c) => {
      const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
      const subscription = await getSubscription(deps, ctx);
      return c.json({ subscription: subscription ? subscriptionView(deps, subscription) : null }, 200);
    })
    .openapi(changeSub, async (c) => {
      const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
      const body = c.req.valid("json");
      const result = await applySubscriptionEvent(deps, ctx, {
        event: body.event,
        source: "admin",
        plan: body.plan,
        periodStart: body.periodStart ? new Date(body.periodStart) : undefined,
        periodEnd: body.periodEnd ? new Date(body.periodEnd) : undefined,
        reason: body.reason,
      });
      return c.json({ subscription: subscriptionView(deps, result.subscription) }, 200);
    })
    .openapi(history, async (c) => {
      const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
      const page = await listSubscriptionHistory(deps, ctx, c.req.valid("query"));
      return c.json(
        {
          items: page.items.map((r) => ({
            id: r.id,
            event: r.event,
            fromStatus: r.fromStatus,
            toStatus: r.toStatus,
            fromPlan: r.fromPlan,
            toPlan: r.toPlan,
            source: r.source,
            actorId: r.actorId,
            externalEventId: r.externalEventId,
            reason: r.reason,
            occurredAt: r.occurredAt.toISOString(),
          })),
          nextCursor: page.nextCursor,
        },
        200,
      );
    })
    .openapi(adminFeatures, async (c) => {
      const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
      return c.json(featuresView(await getTenantFeatures(deps, ctx)), 200);
    })
    .openapi(putOverride, async (c) => {
      const { tenantId, featureKey } = c.req.valid("param");
      await updateFeatureOverride(deps, adminCtxOf(c, tenantId), { featureKey, ...c.req.valid("json") });
      return c.body(null, 204);
    })
    .openapi(deleteOverride, async (c) => {
      const { tenantId, featureKey } = c.req.valid("param");
      await deleteFeatureOverride(deps, adminCtxOf(c, tenantId), { featureKey });
      return c.body(null, 204);
    })
    .openapi(usageRoute, async (c) => {
      const report = await getUsageReport(deps, adminCtxOf(c, c.req.valid("param").tenantId));
      return c.json(
        {
          items: report.items,
          corrections: report.corrections.map((r) => ({
            ...r,
            periodStart: r.periodStart.toISOString(),
            correctedAt: r.correctedAt.toISOString(),
          })),
        },
        200,
      );
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const billingArea = defineArea({
  name: "admin-billing",
  routes: [adminBillingRoutes],
  auditActions: BILLING_ACTIONS,
});
