import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { BULK_BATCH_SIZE } from "../../jobs/admin/bulk-batches.ts";
import { cancelJob } from "../../jobs/admin/cancel-job.ts";
import { cancelJobs } from "../../jobs/admin/cancel-jobs.ts";
import { getJob } from "../../jobs/admin/get-job.ts";
import { CANCELLABLE_STATUSES, type JobFilter, RETRYABLE_STATUSES } from "../../jobs/admin/job-filter.ts";
import { jobStatuses } from "../../jobs/admin/job-view.ts";
import { listJobs } from "../../jobs/admin/list-jobs.ts";
import { retryDeadJob } from "../../jobs/admin/retry-job.ts";
import { retryJobs } from "../../jobs/admin/retry-jobs.ts";
import { MAX_JOB_PRIORITY, setJobPriority } from "../../jobs/admin/set-job-priority.ts";
import { MAX_PROGRESS_BYTES, MAX_RESULT_BYTES } from "../../jobs/registry.ts";
import { defineArea } from "../area.ts";
import { STAFF_ROLES } from "../console/layout.ts";
import { jobPages } from "../console/pages-jobs.ts";
import { apiRoute, json, jsonBody, pageQuery, problem } from "../openapi.ts";
import { createRouter, ctxOf } from "../request-context.ts";
import { JOBS_ACTIONS } from "./admin-jobs-actions.ts";

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
    groupKey: z
      .string()
      .nullable()
      .openapi({ description: "Fairness group: a tenant's job has its tenant id unless set otherwise." }),
    priority: z.number().int().openapi({ description: "Higher runs first, before fairness between groups." }),
    progress: z.unknown().openapi({
      description: `What the handler last reported (JSON, at most ${MAX_PROGRESS_BYTES} bytes); null if nothing.`,
    }),
    result: z.unknown().openapi({
      description: `The handler's return value (JSON, at most ${MAX_RESULT_BYTES} bytes); null if none.`,
    }),
    flowId: z.string().nullable().openapi({ description: "The flow the job belongs to (enqueueFlow)." }),
    flowKey: z.string().nullable().openapi({ description: "The job's key within its flow." }),
    waitingOn: z.number().int().openapi({ description: "Parents not yet resolved (status waiting)." }),
    onParentFailure: z
      .enum(["cancel", "run", "wait"])
      .openapi({ description: "What a parent that ends dead or canceled does to this job." }),
    createdAt: z.string(),
    updatedAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .openapi("BackgroundJob");

export const jobDetail = job
  .extend({
    dependsOn: z.array(z.number().int()).openapi({ description: "Ids of the jobs this one depends on." }),
  })
  .openapi("BackgroundJobDetail");

const idParam = z.object({
  id: z
    .string()
    .regex(/^\d{1,15}$/, "must be a job id")
    .openapi({ param: { name: "id", in: "path" }, example: "42" }),
});

/** The filter fields, the same names in the list's query and the bulk actions' body. */
const filterFields = {
  status: z.enum(jobStatuses).optional(),
  kind: z.string().min(1).max(200).optional(),
  group: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .openapi({ description: "A group key (`groupKey`), e.g. a tenant id." }),
  createdFrom: z.iso
    .datetime({ offset: true })
    .optional()
    .openapi({ description: "Created at or after (ISO 8601)." }),
  createdTo: z.iso
    .datetime({ offset: true })
    .optional()
    .openapi({ description: "Created before (ISO 8601)." }),
};

function toFilter(input: {
  status?: JobFilter["status"];
  kind?: string;
  group?: string;
  createdFrom?: string;
  createdTo?: string;
}): JobFilter {
  return {
    status: input.status,
    kind: input.kind,
    group: input.group,
    createdFrom: input.createdFrom === undefined ? undefined : new Date(input.createdFrom),
    createdTo: input.createdTo === undefined ? undefined : new Date(input.createdTo),
  };
}

const list = apiRoute("platform", {
  method: "get",
  path: "/api/admin/jobs",
  operationId: "adminListJobs",
  tags: ["admin"],
  summary: "List background jobs, newest first, by status, kind, group and creation time.",
  request: {
    query: z.object({
      ...filterFields,
      ...pageQuery,
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

const show = apiRoute("platform", {
  method: "get",
  path: "/api/admin/jobs/{id}",
  operationId: "adminGetJob",
  tags: ["admin"],
  summary: "Show one background job.",
  request: { params: idParam },
  responses: {
    200: json("The job, with its result and the ids it depends on.", jobDetail),
    404: problem("No job with this id."),
  },
});

const retry = apiRoute("platform", {
  method: "post",
  path: "/api/admin/jobs/{id}/retry",
  operationId: "adminRetryJob",
  tags: ["admin"],
  summary: "Retry a dead or canceled job: fresh attempts, due now.",
  request: { params: idParam },
  responses: {
    200: json("The job, pending again.", job),
    404: problem("No job with this id."),
    409: problem("The job is neither dead nor canceled, or another unfinished job holds its dedup key."),
  },
});

const cancel = apiRoute("platform", {
  method: "post",
  path: "/api/admin/jobs/{id}/cancel",
  operationId: "adminCancelJob",
  tags: ["admin"],
  summary: "Cancel a job: a pending or failed one never runs; a running one's handler is signalled.",
  request: { params: idParam },
  responses: {
    200: json("The job, canceled.", job),
    404: problem("No job with this id."),
    409: problem("The job has finished (succeeded, dead or canceled)."),
  },
});

type Status = (typeof jobStatuses)[number];

/** Which jobs a bulk action takes: at least one field, and only a status the action applies to. */
const filterBodyOf = (name: string, statuses: readonly [Status, ...Status[]]) =>
  z
    .object({ ...filterFields, status: z.enum(statuses).optional() })
    .strict()
    .openapi(name, {
      description: "Which jobs to act on; at least one field. Same names as the list's query.",
      minProperties: 1,
    });
const retryFilter = filterBodyOf("BackgroundJobRetryFilter", RETRYABLE_STATUSES);
const cancelFilter = filterBodyOf("BackgroundJobCancelFilter", CANCELLABLE_STATUSES);
const bulkResult = z
  .object({ changed: z.number().int().openapi({ description: "Jobs changed." }) })
  .openapi("BackgroundJobBulkResult");

const bulkRetry = apiRoute("platform", {
  method: "post",
  path: "/api/admin/jobs/retry",
  operationId: "adminRetryJobs",
  tags: ["admin"],
  summary: `Retry every dead or canceled job the filter matches, ${BULK_BATCH_SIZE} rows a statement.`,
  request: { body: jsonBody(retryFilter) },
  responses: {
    200: json("How many jobs were retried.", bulkResult),
    400: problem("No filter, or a status other than dead or canceled."),
  },
});

const bulkCancel = apiRoute("platform", {
  method: "post",
  path: "/api/admin/jobs/cancel",
  operationId: "adminCancelJobs",
  tags: ["admin"],
  summary: `Cancel every unfinished job the filter matches, ${BULK_BATCH_SIZE} rows a statement.`,
  request: { body: jsonBody(cancelFilter) },
  responses: {
    200: json("How many jobs were canceled.", bulkResult),
    400: problem("No filter, or a status other than pending, failed or processing."),
  },
});

const reprioritise = apiRoute("platform", {
  method: "patch",
  path: "/api/admin/jobs/{id}",
  operationId: "adminUpdateJob",
  tags: ["admin"],
  summary: "Change a waiting (pending or failed) job's priority.",
  request: {
    params: idParam,
    body: jsonBody(
      z
        .object({ priority: z.number().int().min(-MAX_JOB_PRIORITY).max(MAX_JOB_PRIORITY) })
        .openapi("BackgroundJobUpdate"),
    ),
  },
  responses: {
    200: json("The job with its new priority.", job),
    400: problem("Invalid body."),
    404: problem("No job with this id."),
    409: problem("The job is not pending or failed (running or finished)."),
  },
});

/** Platform-admin job endpoints. Each declares `platform` access. */
export function adminJobRoutes(deps: Deps) {
  return createRouter()
    .openapi(list, async (c) => {
      const { limit, cursor, ...filter } = c.req.valid("query");
      return c.json(await listJobs(deps, ctxOf(c, null), { ...toFilter(filter), limit, cursor }), 200);
    })
    .openapi(show, async (c) => {
      const found = await getJob(deps, ctxOf(c, null), { id: Number(c.req.valid("param").id) });
      if (!found) throw new AppError("not_found", "No job with this id.");
      return c.json(found, 200);
    })
    .openapi(retry, async (c) => {
      return c.json(await retryDeadJob(deps, ctxOf(c, null), { id: Number(c.req.valid("param").id) }), 200);
    })
    .openapi(cancel, async (c) => {
      return c.json(await cancelJob(deps, ctxOf(c, null), { id: Number(c.req.valid("param").id) }), 200);
    })
    .openapi(bulkRetry, async (c) => {
      return c.json(await retryJobs(deps, ctxOf(c, null), toFilter(c.req.valid("json"))), 200);
    })
    .openapi(bulkCancel, async (c) => {
      return c.json(await cancelJobs(deps, ctxOf(c, null), toFilter(c.req.valid("json"))), 200);
    })
    .openapi(reprioritise, async (c) => {
      const id = Number(c.req.valid("param").id);
      return c.json(await setJobPriority(deps, ctxOf(c, null), { id, ...c.req.valid("json") }), 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const jobsArea = defineArea({
  name: "admin-jobs",
  routes: [adminJobRoutes],
  auditActions: JOBS_ACTIONS,
  consolePages: [{ path: "/console/jobs", title: "Jobs", seenBy: STAFF_ROLES, routes: jobPages }],
});
