import { Hono } from "hono";
import type { JobStatus } from "../../db/schema/jobs.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { cancelFlow } from "../../jobs/admin/cancel-flow.ts";
import { cancelJob } from "../../jobs/admin/cancel-job.ts";
import { cancelJobs } from "../../jobs/admin/cancel-jobs.ts";
import { countBulkTargets } from "../../jobs/admin/count-bulk-targets.ts";
import { getFlow } from "../../jobs/admin/get-flow.ts";
import { getJob } from "../../jobs/admin/get-job.ts";
import type { JobFilter } from "../../jobs/admin/job-filter.ts";
import { jobStatuses } from "../../jobs/admin/job-view.ts";
import { jobCursor, listJobs } from "../../jobs/admin/list-jobs.ts";
import { retryDeadJob } from "../../jobs/admin/retry-job.ts";
import { retryJobs } from "../../jobs/admin/retry-jobs.ts";
import { setJobPriority } from "../../jobs/admin/set-job-priority.ts";
import { listSchedules, putSchedule, runScheduleNow } from "../../jobs/schedules.ts";
import { getTenantCodes, isUuid } from "../../tenancy/tenants.ts";
import { ctxOf } from "../request-context.ts";
import { flowView } from "./flows-views.ts";
import {
  bulkConfirmView,
  type FilterFields,
  jobDetailView,
  jobsListView,
  query,
  schedulesView,
} from "./jobs-views.ts";
import { layout } from "./layout.ts";
import { consoleActed, consoleCursor, formOf, instant, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

const JOB_ID = /^\d{1,15}$/;

const FILTER_NAMES = ["status", "kind", "group", "createdFrom", "createdTo"] as const;

function fieldsOf(source: Record<string, string | undefined>): FilterFields {
  const out: FilterFields = {};
  for (const name of FILTER_NAMES) {
    const value = source[name]?.trim();
    if (value) out[name] = value.slice(0, 200);
  }
  return out;
}

/** The domain filter of the form's fields; the tenant given by code or id. */
async function filterOf(
  deps: Deps,
  fields: FilterFields,
): Promise<{ filter: JobFilter; unknownTenant: boolean }> {
  const filter: JobFilter = {};
  if (fields.status) {
    if (!(jobStatuses as readonly string[]).includes(fields.status))
      throw new AppError("validation_failed", "The status is not valid.", {
        fields: [{ path: "status", message: `one of ${jobStatuses.join(", ")}` }],
      });
    filter.status = fields.status as JobStatus;
  }
  if (fields.kind) filter.kind = fields.kind;
  let unknownTenant = false;
  if (fields.group) {
    if (isUuid(fields.group)) filter.group = fields.group.toLowerCase();
    else {
      const found = await deps.tenants.byCode(fields.group.toLowerCase());
      // not a tenant's code: taken as a group key as it is (a job kind may group by something else)
      unknownTenant = !found;
      filter.group = found?.id ?? fields.group;
    }
  }
  filter.createdFrom = instant(fields.createdFrom, "createdFrom");
  filter.createdTo = instant(fields.createdTo, "createdTo");
  return { filter, unknownTenant };
}

const DONE: Record<string, string> = { cancel: "canceled", retry: "retried" };
const JOB_DONE: Record<string, string> = {
  priority: "Priority changed: the next claims honour it.",
  retried: "The job is pending again, due now.",
  canceled: "The job is canceled; if it was running, its handler was signalled to stop.",
};
const SCHEDULE_DONE: Record<string, string> = {
  enabled: "Schedule resumed: it runs from its next slot (missed slots are not caught up).",
  disabled: "Schedule paused.",
  run: "One run enqueued now.",
};

/** Jobs: the filtered list, bulk actions with their count first, one job with its actions. */
export function jobPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/jobs", async (c) => {
    const viewer = viewerOf(c);
    const q = c.req.query();
    const fields = fieldsOf(q);
    const { filter, unknownTenant } = await filterOf(deps, fields);
    const cursor = consoleCursor(jobCursor, q.cursor);
    const page = await listJobs(deps, ctxOf(c, null), { ...filter, cursor, limit: 50 });
    const codes = await getTenantCodes(deps, ctxOf(c, null), {
      ids: page.items.flatMap((j) => (j.groupKey ? [j.groupKey] : [])),
    });
    const done = q.done && DONE[q.done] ? `${q.changed ?? 0} job(s) ${DONE[q.done]}.` : undefined;
    const body = jobsListView({ viewer, fields, page, codes, done, unknownTenant });
    return pageResponse(c, layout({ title: "Jobs", section: "/console/jobs", viewer, body }));
  });

  // the count before the confirmation: how many jobs the action would change now
  router.get("/console/jobs/bulk", async (c) => {
    const viewer = viewerOf(c);
    if (!viewer.canChange)
      throw new AppError("forbidden", "The platform_viewer role reads; it changes nothing.");
    const q = c.req.query();
    const action = q.action === "retry" ? "retry" : "cancel";
    const fields = fieldsOf(q);
    // the jobs counted are the jobs changed: the confirmation covers jobs created until now only
    const now = deps.clock.now();
    const { filter } = await filterOf(deps, fields);
    if (!filter.createdTo || filter.createdTo > now) {
      filter.createdTo = now;
      fields.createdTo = now.toISOString().replace(/Z$/, "");
    }
    const count = await countBulkTargets(deps, ctxOf(c, null), { action, filter });
    const body = bulkConfirmView({ viewer, action, count, fields, back: fieldsOf(q) });
    return pageResponse(c, layout({ title: "Bulk action", section: "/console/jobs", viewer, body }));
  });

  router.post("/console/jobs/bulk", async (c) => {
    const form = await formOf(c);
    const action = form.action === "retry" ? "retry" : "cancel";
    const fields = fieldsOf(form);
    const { filter } = await filterOf(deps, fields);
    const ctx = ctxOf(c, null);
    // the same domain functions as POST /api/admin/jobs/cancel and /retry
    const { changed } =
      action === "cancel" ? await cancelJobs(deps, ctx, filter) : await retryJobs(deps, ctx, filter);
    consoleActed(deps, c, `jobs.bulk_${action}`, { type: "jobs", id: "filter" }, { filter: fields, changed });
    const back = { ...fields };
    delete back.createdTo;
    return seeOther(c, `/console/jobs${query(back, { done: action, changed: String(changed) })}`);
  });

  singleJobRoutes(router, deps);
  flowRoutes(router, deps);
  return router;
}

/** One job: its page, and retry, priority and cancel. */
function singleJobRoutes(router: Hono<ConsoleEnv>, deps: Deps): void {
  router.get("/console/jobs/:id", async (c) => {
    const viewer = viewerOf(c);
    const id = c.req.param("id");
    if (!JOB_ID.test(id)) throw new AppError("not_found", "No job with this id.");
    const job = await getJob(deps, ctxOf(c, null), { id: Number(id) });
    if (!job) throw new AppError("not_found", "No job with this id.");
    const codes = await getTenantCodes(deps, ctxOf(c, null), { ids: job.groupKey ? [job.groupKey] : [] });
    const tenant = job.groupKey ? codes.get(job.groupKey) : undefined;
    const done = c.req.query("done");
    const body = jobDetailView({
      viewer,
      job,
      tenant,
      done: done ? JOB_DONE[done] : undefined,
      redactor: deps.redactor,
    });
    return pageResponse(c, layout({ title: `Job ${job.id}`, section: "/console/jobs", viewer, body }));
  });

  router.post("/console/jobs/:id/retry", async (c) => {
    const id = c.req.param("id");
    if (!JOB_ID.test(id)) throw new AppError("not_found", "No job with this id.");
    await retryDeadJob(deps, ctxOf(c, null), { id: Number(id) });
    consoleActed(deps, c, "job.retried", { type: "job", id });
    return seeOther(c, `/console/jobs/${id}?done=retried`);
  });

  router.post("/console/jobs/:id/priority", async (c) => {
    const id = c.req.param("id");
    if (!JOB_ID.test(id)) throw new AppError("not_found", "No job with this id.");
    const form = await formOf(c);
    const priority = /^-?\d{1,5}$/.test(form.priority ?? "") ? Number(form.priority) : Number.NaN;
    // the same function as PATCH /api/admin/jobs/{id}: it refuses a priority out of range (400)
    await setJobPriority(deps, ctxOf(c, null), { id: Number(id), priority });
    consoleActed(deps, c, "job.priority_changed", { type: "job", id }, { priority });
    return seeOther(c, `/console/jobs/${id}?done=priority`);
  });

  router.post("/console/jobs/:id/cancel", async (c) => {
    const id = c.req.param("id");
    if (!JOB_ID.test(id)) throw new AppError("not_found", "No job with this id.");
    await cancelJob(deps, ctxOf(c, null), { id: Number(id) });
    consoleActed(deps, c, "job.canceled", { type: "job", id });
    return seeOther(c, `/console/jobs/${id}?done=canceled`);
  });
}

/** A flow: its state drawn in layers, and cancel. */
function flowRoutes(router: Hono<ConsoleEnv>, deps: Deps): void {
  router.get("/console/flows/:flowId", async (c) => {
    const flowId = c.req.param("flowId");
    const flow = await getFlow(deps, ctxOf(c, null), { flowId, limit: 200, cursor: c.req.query("cursor") });
    if (!flow) throw new AppError("not_found", "No flow with this id.");
    const done = c.req.query("done") === "canceled" ? "The flow's unfinished jobs were canceled." : undefined;
    const body = flowView({ viewer: viewerOf(c), flow, done });
    return pageResponse(
      c,
      layout({ title: `Flow ${flowId}`, section: "/console/jobs", viewer: viewerOf(c), body }),
    );
  });

  router.post("/console/flows/:flowId/cancel", async (c) => {
    const flowId = c.req.param("flowId");
    await cancelFlow(deps, ctxOf(c, null), { flowId });
    consoleActed(deps, c, "job.canceled", { type: "flow", id: flowId });
    return seeOther(c, `/console/flows/${flowId}?done=canceled`);
  });
}

/** Recurring schedules: next runs, pause and resume, run now. */
export function schedulePages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  router.get("/console/schedules", async (c) => {
    const viewer = viewerOf(c);
    const done = c.req.query("done");
    const schedules = await listSchedules(deps, ctxOf(c, null));
    const body = schedulesView({ viewer, schedules, done: done ? SCHEDULE_DONE[done] : undefined });
    return pageResponse(c, layout({ title: "Schedules", section: "/console/schedules", viewer, body }));
  });

  for (const enabled of [true, false]) {
    router.post(`/console/schedules/:name/${enabled ? "enable" : "disable"}`, async (c) => {
      const name = c.req.param("name");
      const ctx = ctxOf(c, null);
      const current = (await listSchedules(deps, ctx)).find((s) => s.name === name);
      if (!current) throw new AppError("not_found", "No schedule with this name.");
      // the same write as PUT /api/admin/schedules/{name}, with only `enabled` changed
      await putSchedule(deps, ctx, {
        name,
        cron: current.cron,
        timeZone: current.timeZone,
        kind: current.kind,
        payload: current.payload,
        catchUp: current.catchUp,
        enabled,
      });
      consoleActed(deps, c, enabled ? "schedule.enabled" : "schedule.disabled", {
        type: "schedule",
        id: name,
      });
      return seeOther(c, `/console/schedules?done=${enabled ? "enabled" : "disabled"}`);
    });
  }

  router.post("/console/schedules/:name/run", async (c) => {
    const name = c.req.param("name");
    const { jobId } = await runScheduleNow(deps, ctxOf(c, null), { name });
    consoleActed(deps, c, "schedule.run", { type: "schedule", id: name }, { jobId });
    return seeOther(c, "/console/schedules?done=run");
  });
  return router;
}
