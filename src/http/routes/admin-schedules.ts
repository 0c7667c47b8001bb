import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { API_CRON_PATTERN } from "../../jobs/cron-pattern.ts";
import {
  catchUpPolicies,
  deleteSchedule,
  listSchedulePage,
  putSchedule,
  runScheduleNow,
} from "../../jobs/schedules.ts";
import { API_JOB_KINDS } from "../../loops/api-background.ts";
import { defineArea } from "../area.ts";
import { STAFF_ROLES } from "../console/layout.ts";
import { schedulePages } from "../console/pages-jobs.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem } from "../openapi.ts";
import { createRouter, ctxOf } from "../request-context.ts";
import { SCHEDULES_ACTIONS } from "./admin-schedules-actions.ts";

const schedule = z
  .object({
    name: z.string(),
    cron: z
      .string()
      .openapi({ description: "Five fields, or six with seconds first.", example: "0 30 2 * * *" }),
    timeZone: z
      .string()
      .openapi({ description: "IANA time zone the cron is read in.", example: "Europe/Berlin" }),
    kind: z.string(),
    payload: z.record(z.string(), z.unknown()),
    enabled: z.boolean(),
    catchUp: z.enum(catchUpPolicies),
    lastSlot: z
      .string()
      .nullable()
      .openapi({ description: "The latest slot handled (enqueued or skipped)." }),
    nextRuns: z.array(z.string()).openapi({ description: "The next three slots (none while disabled)." }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("JobSchedule");

const nameParam = z.object({
  name: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._:-]{0,99}$/, "must be a schedule name")
    .openapi({ param: { name: "name", in: "path" }, example: "nightly-report" }),
});

/** The IANA zones the runtime knows, and `UTC` (which `Intl.supportedValuesOf` leaves out). */
const TIME_ZONES = [...new Set(["UTC", ...Intl.supportedValuesOf("timeZone")])] as [string, ...string[]];

const list = apiRoute("platform", {
  method: "get",
  path: "/api/admin/schedules",
  operationId: "adminListSchedules",
  tags: ["admin"],
  summary: "List the recurring schedules by name, with their next run times, a page at a time.",
  request: { query: z.object(pageQuery) },
  responses: {
    200: json("A page of schedules, by name.", page(schedule).openapi("JobScheduleList")),
  },
});

const put = apiRoute(
  "platform",
  {
    method: "put",
    path: "/api/admin/schedules/{name}",
    operationId: "adminPutSchedule",
    tags: ["admin"],
    summary: "Create or replace a recurring schedule.",
    request: {
      params: nameParam,
      body: jsonBody(
        z
          .object({
            cron: z
              .string()
              .regex(new RegExp(API_CRON_PATTERN), "not a cron expression of the API's form")
              .openapi({
                description:
                  "Five fields (minute hour day-of-month month day-of-week; 0 and 7 are Sunday), or six with a seconds field first that is one value: a schedule runs at most once a minute. A field is `*`, `*/step`, or a comma list of numbers and ascending ranges `a-b` (a range with an optional `/step`), within the field's bounds; fields separated by one space. No names (`MON`), `L`, `W`, `#` or `?`.",
                example: "0 30 2 * * *",
              }),
            timeZone: z
              .enum(TIME_ZONES)
              .default("UTC")
              .openapi({ description: "An IANA time zone this server knows (`UTC` included)." }),
            kind: z
              .enum(API_JOB_KINDS as [string, ...string[]])
              .openapi({ description: "A job kind a handler is registered for." }),
            payload: z.record(z.string(), z.unknown()).default({}),
            enabled: z.boolean().default(true),
            catchUp: z.enum(catchUpPolicies).default("skip"),
          })
          .openapi("JobScheduleInput"),
      ),
    },
    responses: {
      200: json("Replaced.", schedule),
      201: json("Created.", schedule),
      400: problem("Invalid body: the problem's `errors` name the field (`cron`, `timeZone`, …)."),
    },
  },
  { location: true },
);

const remove = apiRoute("platform", {
  method: "delete",
  path: "/api/admin/schedules/{name}",
  operationId: "adminDeleteSchedule",
  tags: ["admin"],
  summary: "Delete a recurring schedule (jobs already enqueued stay).",
  request: { params: nameParam },
  responses: {
    204: { description: "Deleted." },
    404: problem("No schedule with this name."),
  },
});

const run = apiRoute("platform", {
  method: "post",
  path: "/api/admin/schedules/{name}/run",
  operationId: "adminRunSchedule",
  tags: ["admin"],
  summary: "Enqueue one run of a schedule now, outside its slots.",
  request: { params: nameParam },
  responses: {
    202: json("Enqueued.", z.object({ jobId: z.number().int() }).openapi("JobScheduleRun")),
    404: problem("No schedule with this name."),
  },
});

/** Platform-admin schedule endpoints. Each declares `platform` access. */
export function adminScheduleRoutes(deps: Deps) {
  return createRouter()
    .openapi(list, async (c) => {
      return c.json(await listSchedulePage(deps, ctxOf(c, null), c.req.valid("query")), 200);
    })
    .openapi(put, async (c) => {
      const { schedule: view, created } = await putSchedule(deps, ctxOf(c, null), {
        name: c.req.valid("param").name,
        ...c.req.valid("json"),
        knownKinds: API_JOB_KINDS,
      });
      return created
        ? c.json(view, 201, { location: `/api/admin/schedules/${encodeURIComponent(view.name)}` })
        : c.json(view, 200);
    })
    .openapi(remove, async (c) => {
      await deleteSchedule(deps, ctxOf(c, null), { name: c.req.valid("param").name });
      return c.body(null, 204);
    })
    .openapi(run, async (c) => {
      return c.json(await runScheduleNow(deps, ctxOf(c, null), { name: c.req.valid("param").name }), 202);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const schedulesArea = defineArea({
  name: "admin-schedules",
  routes: [adminScheduleRoutes],
  auditActions: SCHEDULES_ACTIONS,
  consolePages: [
    { path: "/console/schedules", title: "Schedules", seenBy: STAFF_ROLES, routes: schedulePages },
  ],
});
