import { createRoute, z } from "@hono/zod-openapi";
import { jobStatuses } from "../../db/schema/jobs.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { getJob, listJobs, retryDeadJob } from "../../jobs/admin.ts";
import { createRouter } from "../context.ts";
import { problem } from "../openapi.ts";

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

const list = createRoute({
  method: "get",
  path: "/api/admin/jobs",
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
    200: {
      description: "A page of jobs; pass `nextCursor` as `cursor` for the next one.",
      content: {
        "application/json": { schema: z.object({ items: z.array(job), nextCursor: z.string().nullable() }) },
      },
    },
    400: problem("Invalid query."),
  },
});

const show = createRoute({
  method: "get",
  path: "/api/admin/jobs/{id}",
  tags: ["admin"],
  summary: "Show one background job.",
  request: { params: idParam },
  responses: {
    200: { description: "The job.", content: { "application/json": { schema: job } } },
    404: problem("No job with this id."),
  },
});

const retry = createRoute({
  method: "post",
  path: "/api/admin/jobs/{id}/retry",
  tags: ["admin"],
  summary: "Retry a dead job: fresh attempts, due now.",
  request: { params: idParam },
  responses: {
    200: { description: "The job, pending again.", content: { "application/json": { schema: job } } },
    404: problem("No job with this id."),
    409: problem("The job is not dead, or another unfinished job holds its dedup key."),
  },
});

/** Platform-admin job endpoints. Mounted behind the platform-admin guard by src/app.ts. */
export function adminJobRoutes(deps: Deps) {
  const db = deps.database.db;
  return createRouter()
    .openapi(list, async (c) => {
      const query = c.req.valid("query");
      return c.json(await listJobs(db, query), 200);
    })
    .openapi(show, async (c) => {
      const found = await getJob(db, Number(c.req.valid("param").id));
      if (!found) throw new AppError("not_found", "No job with this id.");
      return c.json(found, 200);
    })
    .openapi(retry, async (c) => {
      return c.json(await retryDeadJob(db, deps.clock, Number(c.req.valid("param").id)), 200);
    });
}
