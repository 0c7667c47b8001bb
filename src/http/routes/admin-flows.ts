import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { cancelFlow } from "../../jobs/admin/cancel-flow.ts";
import { getFlow } from "../../jobs/admin/get-flow.ts";
import { jobStatuses } from "../../jobs/admin/job-view.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, pageQuery, problem } from "../openapi.ts";
import { createRouter, ctxOf } from "../request-context.ts";
import { jobDetail } from "./admin-jobs.ts";

const flowParam = z.object({
  flowId: z
    .string()
    .uuid("must be a flow id")
    .openapi({ param: { name: "flowId", in: "path" }, example: "0b6f1c9e-4c1a-4f57-9a55-0d2b1a3c4e5f" }),
});

const flow = z
  .object({
    flowId: z.string(),
    counts: z
      .object(Object.fromEntries(jobStatuses.map((s) => [s, z.number().int().optional()])))
      .openapi({ description: "The flow's jobs by status (the whole flow, on every page)." }),
    total: z.number().int(),
    items: z.array(jobDetail),
    nextCursor: z.string().nullable(),
  })
  .openapi("JobFlow");

const show = apiRoute("platform", {
  method: "get",
  path: "/api/admin/flows/{flowId}",
  operationId: "adminGetFlow",
  tags: ["admin"],
  summary: "Show a flow: its jobs by status and a page of its jobs (enqueue order) with their parents.",
  request: {
    params: flowParam,
    query: z.object(pageQuery),
  },
  responses: {
    200: json("The flow.", flow),
    400: problem("Invalid flow id or query."),
    404: problem("No flow with this id."),
  },
});

const cancel = apiRoute("platform", {
  method: "post",
  path: "/api/admin/flows/{flowId}/cancel",
  operationId: "adminCancelFlow",
  tags: ["admin"],
  summary: "Cancel every unfinished job of a flow; running ones are signalled.",
  request: { params: flowParam },
  responses: {
    200: json(
      "How many jobs were canceled.",
      z.object({ changed: z.number().int() }).openapi("JobFlowCancelResult"),
    ),
    400: problem("Invalid flow id."),
    404: problem("No flow with this id."),
  },
});

/** Platform-admin flow endpoints (flows: src/jobs/enqueue-flow.ts). */
export function adminFlowRoutes(deps: Deps) {
  return createRouter()
    .openapi(show, async (c) => {
      const found = await getFlow(deps, ctxOf(c, null), {
        flowId: c.req.valid("param").flowId,
        ...c.req.valid("query"),
      });
      if (!found) throw new AppError("not_found", "No flow with this id.");
      return c.json(found, 200);
    })
    .openapi(cancel, async (c) => {
      return c.json(await cancelFlow(deps, ctxOf(c, null), { flowId: c.req.valid("param").flowId }), 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const flowsArea = defineArea({ name: "admin-flows", routes: [adminFlowRoutes] });
