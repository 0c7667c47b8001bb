import { z } from "@hono/zod-openapi";
import type { TenantFeatures } from "../../billing/entitlements.ts";
import { getTenantFeatures } from "../../billing/get-tenant-features.ts";
import type { Deps } from "../../deps.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json } from "../openapi.ts";
import { createRouter, tenantCtxOf } from "../request-context.ts";

const featureSchema = z
  .object({
    key: z.string(),
    kind: z.enum(["boolean", "metered", "rate"]),
    unit: z.string(),
    period: z.enum(["month", "never"]),
    enabled: z.boolean(),
    limit: z.number().nullable(),
    source: z.enum(["plan", "override", "suspended"]),
  })
  .openapi("FeatureEntitlement");

/** A tenant's effective features: also what the admin endpoint answers. */
export const featuresSchema = z
  .object({
    tenantId: z.string(),
    plan: z.string(),
    status: z.string(),
    features: z.array(featureSchema),
  })
  .openapi("TenantFeatures");

export function featuresView(features: TenantFeatures) {
  return { ...features, features: Object.values(features.features) };
}

const tenantFeatures = apiRoute(tenantAccess("everyone", { apiKey: "any" }), {
  method: "get",
  path: "/api/tenant/features",
  operationId: "getTenantFeatures",
  tags: ["tenant", "billing"],
  summary: "The calling tenant's own effective features.",
  responses: { 200: json("Effective features.", featuresSchema) },
});

/** Tenant users: their tenant's features (never another tenant's: the id comes from the principal). */
export function tenantFeatureRoutes(deps: Deps) {
  return createRouter().openapi(tenantFeatures, async (c) => {
    return c.json(featuresView(await getTenantFeatures(deps, tenantCtxOf(c))), 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const featuresArea = defineArea({ name: "tenant-features", routes: [tenantFeatureRoutes] });
