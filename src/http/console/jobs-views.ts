import { html } from "hono/html";
import { CANCELLABLE_STATUSES, RETRYABLE_STATUSES } from "../../jobs/admin/job-filter.ts";
import { type JobView, jobStatuses } from "../../jobs/admin/job-view.ts";
import { MAX_JOB_PRIORITY } from "../../jobs/admin/set-job-priority.ts";
import type { ScheduleView } from "../../jobs/schedules.ts";
import type { Page } from "../../pagination.ts";
import type { Redactor } from "../../redact.ts";
import { actionButton, badge, csrfField, type Html, notice, pretty, type Viewer, when } from "./layout.ts";

/** The jobs filter as the console's forms and links carry it (all strings, as typed). */
export interface FilterFields {
  status?: string;
  kind?: string;
  /** A tenant code or id, or another group key (`?tenant=` is the API's tenant selector: not this). */
  group?: string;
  /** `datetime-local` values, read as UTC. */
  createdFrom?: string;
  createdTo?: string;
}

export function query(fields: FilterFields, extra: Record<string, string> = {}): string {
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
<label for="f-from">Created from (UTC)<input id="f-from" name="createdFrom" type="text" inputmode="numeric" placeholder="2026-11-26T10:00:00" pattern="\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?" title="UTC, as 2026-11-26T10:00:00" value="${fields.createdFrom ?? ""}"></label>
<label for="f-to">Created before (UTC)<input id="f-to" name="createdTo" type="text" inputmode="numeric" placeholder="2026-11-26T10:00:00" pattern="\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?" title="UTC, as 2026-11-26T10:00:00" value="${fields.createdTo ?? ""}"></label>
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

/** The jobs list: the filter, the bulk actions when filtered, a page of jobs. */
export function jobsListView(input: {
  viewer: Viewer;
  fields: FilterFields;
  page: Page<JobView>;
  /** Tenant id → code, for the jobs of a tenant. */
  codes: Map<string, string>;
  done?: string;
  unknownTenant: boolean;
}): Html {
  const { viewer, fields, page, codes, done, unknownTenant } = input;
  const filtered = Object.keys(fields).length > 0;
  return html`${notice(done, "ok")}${notice(unknownTenant ? "No Active tenant has this code: it is matched as a group key as typed." : undefined)}
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
}

/** The confirmation of a bulk action: how many jobs it would change now. */
export function bulkConfirmView(input: {
  viewer: Viewer;
  action: "cancel" | "retry";
  count: number;
  /** The filter the action covers (created before now at the latest). */
  fields: FilterFields;
  /** The filter as the operator gave it, for the way back. */
  back: FilterFields;
}): Html {
  const { viewer, action, count, fields, back } = input;
  const verb = action === "cancel" ? "canceled" : "retried";
  return html`<div id="bulk" class="confirm" role="region" aria-labelledby="bulk-title">
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
<a href="/console/jobs${query(back)}">Back</a></div></form>`
    : html`<p><a href="/console/jobs${query(back)}">Back</a></p>`
}
</div>`;
}

/** One job: its state and history, its progress, error and payload (redacted), its actions. */
export function jobDetailView(input: {
  viewer: Viewer;
  job: JobView;
  /** The code of the tenant the job belongs to, if it is a tenant's. */
  tenant: string | undefined;
  done?: string;
  redactor: Pick<Redactor, "value">;
}): Html {
  const { viewer, job, tenant, done, redactor } = input;
  return html`${notice(done, "ok")}
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
<dt>Flow</dt><dd>${job.flowId ? html`<a href="/console/flows/${job.flowId}">${job.flowKey ?? job.flowId}</a> <span class="muted">(${job.waitingOn} parents to go; a dead parent: ${job.onParentFailure})</span>` : "—"}</dd>
</dl></section>
<section class="card" aria-labelledby="h-history"><h2 id="h-history">History</h2><dl class="facts">
<dt>Created</dt><dd>${when(job.createdAt)}</dd>
<dt>Last change</dt><dd>${when(job.updatedAt)}</dd>
<dt>Finished</dt><dd>${when(job.finishedAt)}</dd>
</dl></section>
</div>
<h2>Progress</h2>
${job.progress === null ? html`<p class="muted">Not reported.</p>` : html`<pre>${pretty(redactor.value(job.progress))}</pre>`}
<h2>Result</h2>
${job.result === null ? html`<p class="muted">None.</p>` : html`<pre>${pretty(redactor.value(job.result))}</pre>`}
<h2>Last error</h2>
${job.lastError ? html`<pre>${job.lastError}</pre>` : html`<p class="muted">None.</p>`}
<h2>Payload</h2>
<pre>${pretty(redactor.value(job.payload))}</pre>`;
}

function scheduleRow(viewer: Viewer, s: ScheduleView): Html {
  return html`<tr>
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
</tr>`;
}

/** The recurring schedules with their next runs and actions. */
export function schedulesView(input: { viewer: Viewer; schedules: ScheduleView[]; done?: string }): Html {
  const { viewer, schedules, done } = input;
  return html`${notice(done, "ok")}
<div class="table-wrap"><table class="stack">
<thead><tr><th scope="col">Name</th><th scope="col">Cron</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Catch-up</th><th scope="col">Next runs (UTC)</th><th scope="col">Last slot</th>${viewer.canChange ? html`<th scope="col">Actions</th>` : ""}</tr></thead>
<tbody>${schedules.length ? schedules.map((s) => scheduleRow(viewer, s)) : html`<tr><td colspan="8" class="muted">No schedules.</td></tr>`}</tbody>
</table></div>`;
}
