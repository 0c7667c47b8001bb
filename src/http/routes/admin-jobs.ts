import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { getJob, jobStatuses, listJobs, retryDeadJob } from "../../jobs/admin.ts";
import { createRouter, ctxOf } from "../context.ts";
import { apiRoute, json, problem } from "../openapi.ts";

const job = z
  .object({
    id: z.number().int(),
    kind: z.string(),
    payload: z.unknown(),
    status: z.enum(jobStatuses),
    runAfter: z.string(),
    attempts: z.number().int(),
    maxAttempts: z.number().int(),
    lockedBy: z.string().nullable(),
    lockedUntil: z.string().nullable(),
    lastError: z.string().nullable().openapi({ description: "Redacted, at most 2,000 characters." }),
    dedupKey: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .openapi("BackgroundJob");

const idParam = z.object({
  id: z
    .string()
    .regex(/^\d{1,15}$/, "must be a job id")
    .openapi({ param: { name: "id", in: "path" }, example: "42" }),
});

const list = apiRoute("admin", {
  method: "get",
  path: "/api/admin/jobs",
  operationId: "adminListJobs",
  tags: ["admin"],
  summary: "List background jobs, newest first, by status and kind.",
  request: {
    query: z.object({
      status: z.enum(jobStatuses).optional(),
      kind: z.string().min(1).max(200).optional(),
      limit: z.coerce.number().int().min(1).max(200).default(50),
      cursor: z
        .string()
        .regex(/^\d{1,18}$/, "not a cursor returned by this endpoint")
        .optional(),
    }),
  },
  responses: {
    200: json(
      "A page of jobs; pass `nextCursor` as `cursor` for the next one.",
      z.object({ items: z.array(job), nextCursor: z.string().nullable() }).openapi("BackgroundJobList"),
    ),
    400: problem("Invalid query."),
  },
});

const show = apiRoute("admin", {
  method: "get",
  path: "/api/admin/jobs/{id}",
  operationId: "adminGetJob",
  tags: ["admin"],
  summary: "Show one background job.",
  request: { params: idParam },
  responses: {
    200: json("The job.", job),
    404: problem("No job with this id."),
  },
});

const retry = apiRoute("admin", {
  method: "post",
  path: "/api/admin/jobs/{id}/retry",
  operationId: "adminRetryJob",
  tags: ["admin"],
  summary: "Retry a dead job: fresh attempts, due now.",
  request: { params: idParam },
  responses: {
    200: json("The job, pending again.", job),
    404: problem("No job with this id."),
    409: problem("The job is not dead, or another unfinished job holds its dedup key."),
  },
});

/** Platform-admin job endpoints. Mounted behind the platform-admin guard by src/app.ts. */
export function adminJobRoutes(deps: Deps) {
  return createRouter()
    .openapi(list, async (c) => {
      return c.json(await listJobs(deps, ctxOf(c, null), c.req.valid("query")), 200);
    })
    .openapi(show, async (c) => {
      const found = await getJob(deps, ctxOf(c, null), { id: Number(c.req.valid("param").id) });
      if (!found) throw new AppError("not_found", "No job with this id.");
      return c.json(found, 200);
    })
    .openapi(retry, async (c) => {
      return c.json(await retryDeadJob(deps, ctxOf(c, null), { id: Number(c.req.valid("param").id) }), 200);
    });
}
