import type { Context } from "hono";
import { Hono } from "hono";
import { html } from "hono/html";
import type { JobStatus } from "../../db/schema/jobs.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { cancelJob } from "../../jobs/admin/cancel-job.ts";
import { cancelJobs } from "../../jobs/admin/cancel-jobs.ts";
import { countBulkTargets } from "../../jobs/admin/count-bulk-targets.ts";
import { getJob } from "../../jobs/admin/get-job.ts";
import { CANCELLABLE_STATUSES, type JobFilter, RETRYABLE_STATUSES } from "../../jobs/admin/job-filter.ts";
import { type JobView, jobStatuses } from "../../jobs/admin/job-view.ts";
import { listJobs } from "../../jobs/admin/list-jobs.ts";
import { retryDeadJob } from "../../jobs/admin/retry-job.ts";
import { retryJobs } from "../../jobs/admin/retry-jobs.ts";
import { MAX_JOB_PRIORITY, setJobPriority } from "../../jobs/admin/set-job-priority.ts";
import { listSchedules, putSchedule, runScheduleNow } from "../../jobs/schedules.ts";
import { getTenantCodes, isUuid } from "../../tenancy/tenants.ts";
import { ctxOf } from "../context.ts";
import { actionButton, badge, csrfField, type Html, layout, notice, pretty, when } from "./layout.ts";
import { consoleActed, formOf, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

const JOB_ID = /^\d{1,15}$/;

/** The jobs filter as the console's forms and links carry it (all strings, as typed). */
interface FilterFields {
  status?: string;
  kind?: string;
  /** A tenant code or id, or another group key (`?tenant=` is the API's tenant selector: not this). */
  group?: string;
  /** `datetime-local` values, read as UTC. */
  createdFrom?: string;
  createdTo?: string;
}
const FILTER_NAMES = ["status", "kind", "group", "createdFrom", "createdTo"] as const;

function fieldsOf(source: Record<string, string | undefined>): FilterFields {
  const out: FilterFields = {};
  for (const name of FILTER_NAMES) {
    const value = source[name]?.trim();
    if (value) out[name] = value.slice(0, 200);
  }
  return out;
}

/** A `datetime-local` value (or ISO text) as a UTC instant; a 400 naming the field otherwise. */
function instant(value: string | undefined, field: string): Date | undefined {
  if (!value) return undefined;
  const date = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`);
  if (Number.isNaN(date.getTime()))
    throw new AppError("validation_failed", `${field} is not a date and time.`, {
      fields: [{ path: field, message: "a date and time, e.g. 2026-11-23T10:00" }],
    });
  return date;
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

function query(fields: FilterFields, extra: Record<string, string> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...fields, ...extra })) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

function jobRow(job: JobView, codes: Map<string, string>): Html {
  const tenant = job.groupKey ? codes.get(job.groupKey) : undefined;
  return html`<tr>
<td class="num"><a href="/console/jobs/${job.id}">${job.id}</a></td>
<td data-label="Kind">${job.kind}</td>
<td data-label="Status">${badge(job.status)}</td>
<td data-label="Tenant">${
    tenant
      ? html`<a href="/console/tenants/${job.groupKey}">${tenant}</a>`
      : job.groupKey
        ? html`<code>${job.groupKey}</code>`
        : html`<span class="muted">—</span>`
  }</td>
<td class="num" data-label="Attempts">${job.attempts}/${job.maxAttempts}</td>
<td data-label="Created">${when(job.createdAt)}</td>
<td class="hide-narrow">${job.lastError ? job.lastError.slice(0, 120) : ""}</td>
</tr>`;
}

function filterForm(fields: FilterFields): Html {
  return html`<form class="filters" method="get" action="/console/jobs" role="search" aria-label="Filter jobs">
<label for="f-status">Status<select id="f-status" name="status"><option value="">any</option>${jobStatuses.map(
    (s) => html`<option value="${s}"${s === fields.status ? html` selected` : ""}>${s}</option>`,
  )}</select></label>
<label for="f-kind">Kind<input id="f-kind" name="kind" value="${fields.kind ?? ""}" placeholder="e.g. billing.report"></label>
<label for="f-group">Tenant (code or id)<input id="f-group" name="group" value="${fields.group ?? ""}"></label>
<label for="f-from">Created from (UTC)<input id="f-from" name="createdFrom" type="datetime-local" step="1" value="${fields.createdFrom ?? ""}"></label>
<label for="f-to">Created before (UTC)<input id="f-to" name="createdTo" type="datetime-local" step="1" value="${fields.createdTo ?? ""}"></label>
<button type="submit">Filter</button>
<a class="button secondary" href="/console/jobs">Clear</a>
</form>`;
}

const FIELD_LABELS: Record<string, string> = {
  status: "status",
  kind: "kind",
  group: "tenant",
  createdFrom: "created from",
  createdTo: "created before",
};

const DONE: Record<string, string> = { cancel: "cancelled", retry: "retried" };

/** Jobs: the filtered list, bulk actions with their count first, one job with its actions. */
export function jobPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/jobs", async (c) => {
    const viewer = viewerOf(c);
    const q = c.req.query();
    const fields = fieldsOf(q);
    const { filter, unknownTenant } = await filterOf(deps, fields);
    const cursor = q.cursor && /^\d{1,18}$/.test(q.cursor) ? q.cursor : undefined;
    const page = await listJobs(deps, ctxOf(c, null), { ...filter, cursor, limit: 50 });
    const codes = await getTenantCodes(deps, ctxOf(c, null), {
      ids: page.items.flatMap((j) => (j.groupKey ? [j.groupKey] : [])),
    });
    const filtered = Object.keys(fields).length > 0;
    const done = q.done && DONE[q.done] ? `${q.changed ?? 0} job(s) ${DONE[q.done]}.` : undefined;
    const body = html`${notice(done, "ok")}${notice(unknownTenant ? "No Active tenant has this code: it is matched as a group key as typed." : undefined)}
${filterForm(fields)}
${
  viewer.canChange && filtered
    ? html`<div id="bulk" class="actions">
<a class="button secondary" href="/console/jobs/bulk${query(fields, { action: "cancel" })}" hx-get="/console/jobs/bulk${query(fields, { action: "cancel" })}" hx-target="#bulk" hx-select="#bulk" hx-swap="outerHTML">Cancel the matching jobs…</a>
<a class="button secondary" href="/console/jobs/bulk${query(fields, { action: "retry" })}" hx-get="/console/jobs/bulk${query(fields, { action: "retry" })}" hx-target="#bulk" hx-select="#bulk" hx-swap="outerHTML">Retry the matching jobs…</a>
</div>`
    : ""
}
<div class="table-wrap"><table class="stack">
<caption class="muted">${page.items.length} job(s) on this page, newest first</caption>
<thead><tr><th class="num" scope="col">Id</th><th scope="col">Kind</th><th scope="col">Status</th><th scope="col">Tenant</th><th class="num" scope="col">Attempts</th><th scope="col">Created</th><th class="hide-narrow" scope="col">Last error</th></tr></thead>
<tbody>${page.items.length ? page.items.map((j) => jobRow(j, codes)) : html`<tr><td colspan="7" class="muted">No job matches.</td></tr>`}</tbody>
</table></div>
<nav class="pager" aria-label="Pages">${
      page.nextCursor
        ? html`<a href="/console/jobs${query(fields, { cursor: page.nextCursor })}">Older jobs</a>`
        : html`<span class="muted">No older jobs.</span>`
    }</nav>`;
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
    const verb = action === "cancel" ? "cancelled" : "retried";
    const body = html`<div id="bulk" class="confirm" role="region" aria-labelledby="bulk-title">
<h2 id="bulk-title">${action === "cancel" ? "Cancel" : "Retry"} ${count} job(s)?</h2>
<p><strong>${count}</strong> job(s) match this filter now and would be ${verb}${
      action === "retry" ? html` (fewer if another unfinished job holds a job's dedup key)` : ""
    }: ${Object.entries(fields)
      .map(([k, v]) => `${FIELD_LABELS[k] ?? k} ${k.startsWith("created") ? `${v} UTC` : v}`)
      .join(", ")}${action === "cancel" ? html`; running ones are signalled to stop` : ""}.</p>
${
  count > 0
    ? html`<form method="post" action="/console/jobs/bulk">${csrfField(viewer)}<input type="hidden" name="action" value="${action}">${Object.entries(
        fields,
      ).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<div class="actions"><button type="submit"${action === "cancel" ? html` class="danger"` : ""}>${action === "cancel" ? "Cancel" : "Retry"} ${count} job(s)</button>
<a href="/console/jobs${query(fieldsOf(q))}">Back</a></div></form>`
    : html`<p><a href="/console/jobs${query(fieldsOf(q))}">Back</a></p>`
}
</div>`;
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

  router.get("/console/jobs/:id", async (c) => {
    const viewer = viewerOf(c);
    const id = c.req.param("id");
    if (!JOB_ID.test(id)) throw new AppError("not_found", "No job with this id.");
    const job = await getJob(deps, ctxOf(c, null), { id: Number(id) });
    if (!job) throw new AppError("not_found", "No job with this id.");
    const codes = await getTenantCodes(deps, ctxOf(c, null), { ids: job.groupKey ? [job.groupKey] : [] });
    const tenant = job.groupKey ? codes.get(job.groupKey) : undefined;
    const done = c.req.query("done");
    const messages: Record<string, string> = {
      priority: "Priority changed: the next claims honour it.",
      retried: "The job is pending again, due now.",
      cancelled: "The job is cancelled; if it was running, its handler was signalled to stop.",
    };
    const body = html`${notice(done ? messages[done] : undefined, "ok")}
<div class="actions">${
      (RETRYABLE_STATUSES as readonly string[]).includes(job.status)
        ? actionButton(viewer, { action: `/console/jobs/${job.id}/retry`, label: "Retry" })
        : ""
    }${
      (CANCELLABLE_STATUSES as readonly string[]).includes(job.status)
        ? actionButton(viewer, { action: `/console/jobs/${job.id}/cancel`, label: "Cancel", danger: true })
        : ""
    }
<a href="/console/jobs?kind=${encodeURIComponent(job.kind)}">Jobs of this kind</a>${
      job.groupKey
        ? html` <a href="/console/jobs?group=${encodeURIComponent(job.groupKey)}">Jobs of this ${tenant ? "tenant" : "group"}</a>`
        : ""
    }</div>
${
  viewer.canChange && (job.status === "pending" || job.status === "failed")
    ? html`<form class="filters" method="post" action="/console/jobs/${job.id}/priority" aria-label="Change the priority">${csrfField(viewer)}
<label for="priority">Priority (−${MAX_JOB_PRIORITY} to ${MAX_JOB_PRIORITY})<input id="priority" name="priority" type="number" min="-${MAX_JOB_PRIORITY}" max="${MAX_JOB_PRIORITY}" step="1" required value="${job.priority}"></label>
<button type="submit">Set priority</button></form>`
    : ""
}
<div class="grid">
<section class="card" aria-labelledby="h-state"><h2 id="h-state">State</h2><dl class="facts">
<dt>Kind</dt><dd>${job.kind}</dd>
<dt>Status</dt><dd>${badge(job.status)}</dd>
<dt>Tenant</dt><dd>${tenant ? html`<a href="/console/tenants/${job.groupKey}">${tenant}</a>` : (job.groupKey ?? "—")}</dd>
<dt>Attempts</dt><dd>${job.attempts} of ${job.maxAttempts}</dd>
<dt>Due</dt><dd>${when(job.runAfter)}</dd>
<dt>Locked by</dt><dd>${job.lockedBy ?? "—"} ${job.lockedUntil ? html`until ${when(job.lockedUntil)}` : ""}</dd>
<dt>Priority</dt><dd>${job.priority} <span class="muted">(higher runs first)</span></dd>
<dt>Dedup key</dt><dd>${job.dedupKey ?? "—"}</dd>
</dl></section>
<section class="card" aria-labelledby="h-history"><h2 id="h-history">History</h2><dl class="facts">
<dt>Created</dt><dd>${when(job.createdAt)}</dd>
<dt>Last change</dt><dd>${when(job.updatedAt)}</dd>
<dt>Finished</dt><dd>${when(job.finishedAt)}</dd>
</dl></section>
</div>
<h2>Progress</h2>
${job.progress === null ? html`<p class="muted">Not reported.</p>` : html`<pre>${pretty(deps.redactor.value(job.progress))}</pre>`}
<h2>Last error</h2>
${job.lastError ? html`<pre>${job.lastError}</pre>` : html`<p class="muted">None.</p>`}
<h2>Payload</h2>
<pre>${pretty(deps.redactor.value(job.payload))}</pre>`;
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
    consoleActed(deps, c, "job.cancelled", { type: "job", id });
    return seeOther(c, `/console/jobs/${id}?done=cancelled`);
  });

  return router;
}

function scheduleRows(c: Context<ConsoleEnv>, deps: Deps) {
  return async () => {
    const viewer = viewerOf(c);
    const schedules = await listSchedules(deps, ctxOf(c, null));
    return schedules.map(
      (s) => html`<tr>
<th scope="row"><code>${s.name}</code></th>
<td data-label="Cron"><code>${s.cron}</code> <span class="muted">${s.timeZone}</span></td>
<td data-label="Kind">${s.kind}</td>
<td data-label="State">${badge(s.enabled ? "enabled" : "disabled")}</td>
<td data-label="Catch-up">${s.catchUp}</td>
<td data-label="Next runs">${s.nextRuns.length ? s.nextRuns.map((r) => html`${when(r)}<br>`) : html`<span class="muted">—</span>`}</td>
<td data-label="Last slot">${when(s.lastSlot)}</td>
${viewer.canChange ? html`<td><div class="actions">` : ""}${actionButton(viewer, {
  action: `/console/schedules/${encodeURIComponent(s.name)}/${s.enabled ? "disable" : "enable"}`,
  label: s.enabled ? "Pause" : "Resume",
})}${actionButton(viewer, { action: `/console/schedules/${encodeURIComponent(s.name)}/run`, label: "Run now" })}${viewer.canChange ? html`</div></td>` : ""}
</tr>`,
    );
  };
}

/** Recurring schedules: next runs, pause and resume, run now. */
export function schedulePages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  router.get("/console/schedules", async (c) => {
    const viewer = viewerOf(c);
    const done = c.req.query("done");
    const messages: Record<string, string> = {
      enabled: "Schedule resumed: it runs from its next slot (missed slots are not caught up).",
      disabled: "Schedule paused.",
      run: "One run enqueued now.",
    };
    const rows = await scheduleRows(c, deps)();
    const body = html`${notice(done ? messages[done] : undefined, "ok")}
<div class="table-wrap"><table class="stack">
<thead><tr><th scope="col">Name</th><th scope="col">Cron</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Catch-up</th><th scope="col">Next runs (UTC)</th><th scope="col">Last slot</th>${viewer.canChange ? html`<th scope="col">Actions</th>` : ""}</tr></thead>
<tbody>${rows.length ? rows : html`<tr><td colspan="8" class="muted">No schedules.</td></tr>`}</tbody>
</table></div>`;
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
