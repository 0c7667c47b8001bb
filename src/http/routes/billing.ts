import { createRoute, z } from "@hono/zod-openapi";
import { desc, eq } from "drizzle-orm";
import { listPlans } from "../../billing/catalog.ts";
import {
  type FeatureEntitlement,
  getTenantFeatures,
  setFeatureOverride,
} from "../../billing/entitlements.ts";
import {
  applySubscriptionEvent,
  eventSources,
  getSubscription,
  graceEndsAt,
  listSubscriptionHistory,
  type Subscription,
  type subscriptionEvents,
} from "../../billing/subscriptions.ts";
import { SIGNATURE_HEADER, verifySignature } from "../../billing/webhook-signature.ts";
import { usageReconciliations } from "../../db/schema/billing.ts";
import type { Deps } from "../../deps.ts";
import { AppError, fieldErrors } from "../../errors.ts";
import { readTenantSecret } from "../../providers/secrets.ts";
import { resolveProvider } from "../../providers/tenant-providers.ts";
import { parseTenantSecretKeys } from "../../security/tenant-secrets.ts";
import { getTenant, isUuid } from "../../tenancy/tenants.ts";
import { getTenantUsage } from "../../usage/ledger.ts";
import { createRouter, tenantIdOf } from "../context.ts";
import { outputCacheFor } from "../middleware/output-cache.ts";
import { problem, tenantIdParam } from "../openapi.ts";

const iso = (d: Date | null) => (d ? d.toISOString() : null);

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
    currentPeriodEnd: iso(s.currentPeriodEnd),
    pastDueSince: iso(s.pastDueSince),
    graceEndsAt:
      s.status === "past_due" && s.pastDueSince
        ? graceEndsAt(s.pastDueSince, deps.config.settings.SaasSubscriptions.PastDueGraceDays).toISOString()
        : null,
    suspendedAt: iso(s.suspendedAt),
    canceledAt: iso(s.canceledAt),
    externalRef: s.externalRef,
    version: s.version,
  };
}

const featureSchema = z
  .object({
    key: z.string(),
    kind: z.enum(["boolean", "metered"]),
    unit: z.string(),
    period: z.enum(["month", "never"]),
    enabled: z.boolean(),
    limit: z.number().nullable(),
    source: z.enum(["plan", "override", "suspended"]),
  })
  .openapi("FeatureEntitlement");
const featuresSchema = z
  .object({
    tenantId: z.string(),
    plan: z.string(),
    status: z.string(),
    features: z.array(featureSchema),
  })
  .openapi("TenantFeatures");

const featureKeyParam = tenantIdParam.extend({
  featureKey: z.string().openapi({ param: { name: "featureKey", in: "path" } }),
});

const getSub = createRoute({
  method: "get",
  path: "/api/admin/tenants/{tenantId}/subscription",
  tags: ["admin", "billing"],
  summary: "The tenant's current subscription (null: none yet, the default plan applies).",
  request: { params: tenantIdParam },
  responses: {
    200: {
      description: "The subscription.",
      content: {
        "application/json": { schema: z.object({ subscription: subscriptionSchema.nullable() }) },
      },
    },
    404: problem("No such tenant."),
  },
});

const changeSub = createRoute({
  method: "post",
  path: "/api/admin/tenants/{tenantId}/subscription/events",
  tags: ["admin", "billing"],
  summary: "Apply an event to the tenant's subscription (see docs/billing.md for the transition table).",
  request: {
    params: tenantIdParam,
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.object({
            event: z.enum(eventSources.admin as [string, ...string[]]),
            plan: z.string().min(1).max(64).optional(),
            periodStart: z.iso.datetime({ offset: true }).optional(),
            periodEnd: z.iso.datetime({ offset: true }).optional(),
            reason: z.string().max(500).optional(),
          }),
        },
      },
    },
  },
  responses: {
    200: {
      description: "The subscription after the event.",
      content: { "application/json": { schema: z.object({ subscription: subscriptionSchema }) } },
    },
    400: problem("Unknown plan or invalid body."),
    404: problem("No such tenant."),
    409: problem("The subscription's state does not accept this event."),
  },
});

const history = createRoute({
  method: "get",
  path: "/api/admin/tenants/{tenantId}/subscription/history",
  tags: ["admin", "billing"],
  summary: "Every change of the tenant's subscription, newest first.",
  request: {
    params: tenantIdParam,
    query: z.object({
      limit: z.coerce.number().int().min(1).max(200).default(50),
      before: z.coerce.number().int().min(1).optional(),
    }),
  },
  responses: {
    200: {
      description: "History entries.",
      content: {
        "application/json": {
          schema: z.object({
            items: z.array(
              z.object({
                id: z.number(),
                event: z.string(),
                fromStatus: z.string().nullable(),
                toStatus: z.string(),
                fromPlan: z.string().nullable(),
                toPlan: z.string(),
                source: z.string(),
                actorId: z.string().nullable(),
                externalEventId: z.string().nullable(),
                reason: z.string(),
                occurredAt: z.string(),
              }),
            ),
          }),
        },
      },
    },
    404: problem("No such tenant."),
  },
});

const adminFeatures = createRoute({
  method: "get",
  path: "/api/admin/tenants/{tenantId}/features",
  tags: ["admin", "billing"],
  summary: "The tenant's effective features (plan + overrides; the suspended set while suspended).",
  request: { params: tenantIdParam },
  responses: {
    200: { description: "Effective features.", content: { "application/json": { schema: featuresSchema } } },
    404: problem("No such tenant."),
  },
});

const putOverride = createRoute({
  method: "put",
  path: "/api/admin/tenants/{tenantId}/features/{featureKey}/override",
  tags: ["admin", "billing"],
  summary: "Override one feature for the tenant (replaces the plan's entry; ignored while suspended).",
  request: {
    params: featureKeyParam,
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.object({
            enabled: z.boolean(),
            limit: z.number().int().min(0).nullable().default(null),
            reason: z.string().max(500).default(""),
          }),
        },
      },
    },
  },
  responses: {
    204: { description: "Stored; the tenant's cached features are dropped." },
    404: problem("No such tenant or feature."),
  },
});

const deleteOverride = createRoute({
  method: "delete",
  path: "/api/admin/tenants/{tenantId}/features/{featureKey}/override",
  tags: ["admin", "billing"],
  summary: "Remove the tenant's override of one feature.",
  request: { params: featureKeyParam },
  responses: {
    204: { description: "Removed." },
    404: problem("No such tenant, feature or override."),
  },
});

const usageRoute = createRoute({
  method: "get",
  path: "/api/admin/tenants/{tenantId}/usage",
  tags: ["admin", "billing"],
  summary: "Current-period usage per metered feature (ledger and cached counter) and recent corrections.",
  request: { params: tenantIdParam },
  responses: {
    200: {
      description: "Usage.",
      content: {
        "application/json": {
          schema: z.object({
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
          }),
        },
      },
    },
    404: problem("No such tenant."),
  },
});

function featuresView(features: {
  tenantId: string;
  plan: string;
  status: string;
  features: Record<string, FeatureEntitlement>;
}) {
  return { ...features, features: Object.values(features.features) };
}

/** Platform admin: a tenant's subscription, history, features and usage. */
export function adminBillingRoutes(deps: Deps) {
  const db = deps.database.db;
  const router = createRouter();
  return router
    .openapi(getSub, async (c) => {
      const { tenantId } = c.req.valid("param");
      await getTenant(db, tenantId);
      const subscription = await getSubscription(db, tenantId);
      return c.json({ subscription: subscription ? subscriptionView(deps, subscription) : null }, 200);
    })
    .openapi(changeSub, async (c) => {
      const { tenantId } = c.req.valid("param");
      const body = c.req.valid("json");
      const result = await applySubscriptionEvent(deps, tenantId, {
        event: body.event as (typeof subscriptionEvents)[number],
        source: "admin",
        plan: body.plan,
        periodStart: body.periodStart ? new Date(body.periodStart) : undefined,
        periodEnd: body.periodEnd ? new Date(body.periodEnd) : undefined,
        reason: body.reason,
        actorId: c.get("principal")?.userId ?? null,
      });
      return c.json({ subscription: subscriptionView(deps, result.subscription) }, 200);
    })
    .openapi(history, async (c) => {
      const { tenantId } = c.req.valid("param");
      await getTenant(db, tenantId);
      const rows = await listSubscriptionHistory(db, tenantId, c.req.valid("query"));
      return c.json(
        {
          items: rows.map((r) => ({
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
        },
        200,
      );
    })
    .openapi(adminFeatures, async (c) => {
      const { tenantId } = c.req.valid("param");
      await getTenant(db, tenantId);
      return c.json(featuresView(await getTenantFeatures(deps, tenantId)), 200);
    })
    .openapi(putOverride, async (c) => {
      const { tenantId, featureKey } = c.req.valid("param");
      await setFeatureOverride(deps, tenantId, featureKey, c.req.valid("json"));
      return c.body(null, 204);
    })
    .openapi(deleteOverride, async (c) => {
      const { tenantId, featureKey } = c.req.valid("param");
      await setFeatureOverride(deps, tenantId, featureKey, null);
      return c.body(null, 204);
    })
    .openapi(usageRoute, async (c) => {
      const { tenantId } = c.req.valid("param");
      await getTenant(db, tenantId);
      const [usage, entitlements, corrections] = await Promise.all([
        getTenantUsage(deps, tenantId),
        getTenantFeatures(deps, tenantId),
        db
          .select()
          .from(usageReconciliations)
          .where(eq(usageReconciliations.tenantId, tenantId))
          .orderBy(desc(usageReconciliations.id))
          .limit(50),
      ]);
      return c.json(
        {
          items: usage.map((u) => ({
            feature: u.feature,
            period: u.period,
            used: u.used,
            cached: u.cached,
            limit: entitlements.features[u.feature]?.limit ?? null,
            enabled: entitlements.features[u.feature]?.enabled ?? false,
          })),
          corrections: corrections.map((r) => ({
            feature: r.featureKey,
            periodStart: r.periodStart.toISOString(),
            ledgerTotal: r.ledgerTotal,
            cachedBefore: r.cachedBefore,
            reason: r.reason,
            correctedAt: r.correctedAt.toISOString(),
          })),
        },
        200,
      );
    });
}

const tenantFeatures = createRoute({
  method: "get",
  path: "/api/tenant/features",
  tags: ["tenant", "billing"],
  summary: "The calling tenant's own effective features.",
  responses: {
    200: { description: "Effective features.", content: { "application/json": { schema: featuresSchema } } },
  },
});

/** Tenant users: their tenant's features (never another tenant's: the id comes from the principal). */
export function tenantBillingRoutes(deps: Deps) {
  return createRouter().openapi(tenantFeatures, async (c) => {
    const tenantId = tenantIdOf(c);
    return c.json(featuresView(await getTenantFeatures(deps, tenantId)), 200);
  });
}

const planSchema = z
  .object({
    code: z.string(),
    name: z.string(),
    description: z.string(),
    priceCents: z.number(),
    currency: z.string(),
    features: z.array(
      z.object({
        key: z.string(),
        name: z.string(),
        kind: z.enum(["boolean", "metered"]),
        unit: z.string(),
        period: z.enum(["month", "never"]),
        enabled: z.boolean(),
        limit: z.number().nullable(),
      }),
    ),
  })
  .openapi("Plan");

const plansRoute = createRoute({
  method: "get",
  path: "/api/plans",
  tags: ["billing"],
  summary: "The public plan catalog.",
  responses: {
    200: {
      description: "Public plans with their features.",
      content: { "application/json": { schema: z.object({ items: z.array(planSchema) }) } },
    },
  },
});

/** Anonymous: the public plan catalog, through the HTTP output cache (Production). */
export function planRoutes(deps: Deps) {
  const router = createRouter();
  router.use("/api/plans", outputCacheFor(deps));
  return router.openapi(plansRoute, async (c) => {
    c.header("cache-control", "public, max-age=60");
    return c.json({ items: await listPlans(deps.database.db) }, 200);
  });
}

const webhookBody = z.object({
  /** The provider's event id: a second delivery with the same id changes nothing. */
  id: z.string().min(1).max(200),
  type: z.enum(eventSources.webhook as [string, ...string[]]),
  plan: z.string().min(1).max(64).optional(),
  periodStart: z.iso.datetime({ offset: true }).optional(),
  periodEnd: z.iso.datetime({ offset: true }).optional(),
  subscriptionRef: z.string().max(200).optional(),
});

const webhook = createRoute({
  method: "post",
  path: "/api/webhooks/payments/{tenantId}",
  tags: ["billing"],
  summary:
    "Payment-provider webhook: `plinth-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<raw body>'>` with the tenant's payment webhook secret.",
  request: { params: tenantIdParam },
  responses: {
    200: {
      description: "Applied, or a duplicate delivery (nothing changed).",
      content: {
        "application/json": {
          schema: z.object({ applied: z.boolean(), duplicate: z.boolean(), status: z.string() }),
        },
      },
    },
    400: problem("The body is not a valid event."),
    401: problem("Missing, stale or wrong signature (or no payment provider for the tenant)."),
    409: problem("The subscription's state does not accept this event."),
  },
});

/** The secretRefs entry of a tenant's payment provider that names its webhook-signing secret. */
export const WEBHOOK_SECRET_REF = "webhookSecret";

/** Payment-provider webhooks, verified with the tenant's own secret before anything is parsed. */
export function paymentWebhookRoutes(deps: Deps) {
  const db = deps.database.db;
  const { keyring } = parseTenantSecretKeys(deps.config.settings.Security.TenantSecrets);
  const refuse = (tenantId: string, reason: string) => {
    deps.logger.warn("payment webhook refused", { tenantId, reason });
    return new AppError("unauthorized", "The webhook signature is not valid.");
  };
  return createRouter().openapi(webhook, async (c) => {
    const { tenantId } = c.req.valid("param");
    const raw = await c.req.text();
    if (!isUuid(tenantId)) throw refuse(tenantId, "not a tenant id");
    if (!keyring) throw refuse(tenantId, "tenant secrets are not configured");
    const resolved = await resolveProvider(db, tenantId, "payment", null);
    if (resolved?.source !== "tenant") throw refuse(tenantId, "no active payment provider");
    const secretName = resolved.provider.secretRefs[WEBHOOK_SECRET_REF];
    const secret = secretName ? await readTenantSecret(db, keyring, tenantId, secretName) : null;
    if (!secret) throw refuse(tenantId, `payment provider has no ${WEBHOOK_SECRET_REF} secret`);
    const check = verifySignature(
      c.req.header(SIGNATURE_HEADER),
      raw,
      secret,
      deps.clock.now(),
      deps.config.settings.SaasSubscriptions.WebhookToleranceSeconds,
    );
    if (!check.ok) throw refuse(tenantId, check.reason);
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      throw new AppError("bad_request", "The body is not JSON.");
    }
    const parsed = webhookBody.safeParse(json);
    if (!parsed.success)
      throw new AppError("validation_failed", "The event is not valid.", {
        fields: fieldErrors(parsed.error),
      });
    const event = parsed.data;
    const result = await applySubscriptionEvent(deps, tenantId, {
      event: event.type as (typeof subscriptionEvents)[number],
      source: "webhook",
      plan: event.plan,
      periodStart: event.periodStart ? new Date(event.periodStart) : undefined,
      periodEnd: event.periodEnd ? new Date(event.periodEnd) : undefined,
      externalEventId: event.id,
      externalRef: event.subscriptionRef,
    });
    return c.json(
      { applied: result.changed, duplicate: !result.changed, status: result.subscription.status },
      200,
    );
  });
}
