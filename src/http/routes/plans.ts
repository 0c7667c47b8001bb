import { z } from "@hono/zod-openapi";
import { listPlans } from "../../billing/list-plans.ts";
import type { Deps } from "../../deps.ts";
import { defineArea } from "../area.ts";
import { outputCacheFor } from "../middleware/output-cache.ts";
import { apiRoute, json, page, pageQuery } from "../openapi.ts";
import { anonymousCtxOf, createRouter } from "../request-context.ts";

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
        kind: z.enum(["boolean", "metered", "rate"]),
        unit: z.string(),
        period: z.enum(["month", "never"]),
        enabled: z.boolean(),
        limit: z.number().nullable(),
      }),
    ),
  })
  .openapi("Plan");

const plansRoute = apiRoute("public", {
  method: "get",
  path: "/api/plans",
  operationId: "listPlans",
  tags: ["billing"],
  summary: "The public plan catalog, in catalog order, a page at a time.",
  request: { query: z.object(pageQuery) },
  responses: {
    200: json("Public plans with their features.", page(planSchema).openapi("PlanList")),
  },
});

/** Anonymous: the public plan catalog, through the HTTP output cache (Production). */
export function planRoutes(deps: Deps) {
  const router = createRouter();
  router.use("/api/plans", outputCacheFor(deps));
  return router.openapi(plansRoute, async (c) => {
    c.header("cache-control", "public, max-age=60");
    return c.json(await listPlans(deps, anonymousCtxOf(c), c.req.valid("query")), 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const plansArea = defineArea({ name: "plans", routes: [planRoutes] });
