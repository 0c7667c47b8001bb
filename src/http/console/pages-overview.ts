import { type Context, Hono } from "hono";
import { html } from "hono/html";
import { listPastDueTenants } from "../../billing/list-past-due-tenants.ts";
import type { Ctx } from "../../context.ts";
import { listPlatformCustomDomains } from "../../custom-domains/list-platform-custom-domains.ts";
import type { Deps } from "../../deps.ts";
import { jobActivity } from "../../jobs/admin/job-activity.ts";
import { listJobs } from "../../jobs/admin/list-jobs.ts";
import { summarizeJobs } from "../../jobs/admin/summarize-jobs.ts";
import { loopEnabled, loopNames } from "../../loops/background.ts";
import { defineArea } from "../area.ts";
import { ctxOf } from "../request-context.ts";
import { activityChart } from "./chart.ts";
import { badge, type Html, layout, STAFF_ROLES, when } from "./layout.ts";
import { pageResponse } from "./respond.ts";
import { type ConsoleEnv, viewerOf } from "./session.ts";

const OPEN_STATES = ["pending", "processing", "failed", "dead"] as const;

/** The overview: jobs by state and kind, the last hour's activity, loops, and what needs attention. */
export async function overviewPage(deps: Deps, c: Context<ConsoleEnv>) {
  const body = overviewHtml(deps, await loadOverview(deps, ctxOf(c, null)));
  return pageResponse(c, layout({ title: "Overview", section: "/console", viewer: viewerOf(c), body }));
}

type Overview = Awaited<ReturnType<typeof loadOverview>>;

/** What the overview shows, read at once. */
async function loadOverview(deps: Deps, ctx: Ctx) {
  const [summary, activity, dead, domains, pastDue] = await Promise.all([
    summarizeJobs(deps, ctx),
    jobActivity(deps, ctx, { minutes: 60 }),
    listJobs(deps, ctx, { status: "dead", limit: 10 }),
    listPlatformCustomDomains(deps, ctx, { notActive: true, limit: 20 }).then((page) => page.items),
    listPastDueTenants(deps, ctx, { limit: 20 }).then((page) => page.items),
  ]);
  return { summary, activity, dead, domains, pastDue };
}

function overviewHtml(deps: Pick<Deps, "clock" | "config" | "loopStatus">, data: Overview): Html {
  const { summary, activity, dead, domains, pastDue } = data;
  const loops = new Map(deps.loopStatus.snapshot().map((l) => [l.name, l]));
  const settings = deps.config.settings;
  // htmx refreshes the figures every 30 s in place (the same page, its #live part); without script
  // the page is simply as loaded
  return html`<div id="live" hx-get="/console" hx-trigger="every 30s" hx-select="#live" hx-swap="outerHTML">
<p class="muted">As of ${when(deps.clock.now())}; refreshed every 30 seconds.</p>
<div class="grid">
<section class="card" aria-labelledby="h-states"><h2 id="h-states">Open jobs</h2>
<dl class="facts">${OPEN_STATES.map(
    (s) =>
      html`<dt>${badge(s)}</dt><dd><a href="/console/jobs?status=${s}">${summary.byStatus[s] ?? 0}</a></dd>`,
  )}</dl></section>
<section class="card" aria-labelledby="h-activity"><h2 id="h-activity">Last hour</h2>${activityChart(activity)}</section>
</div>
<h2 id="h-kinds">Open jobs by kind</h2>
<div class="table-wrap"><table aria-labelledby="h-kinds">
<thead><tr><th scope="col">Kind</th><th scope="col">State</th><th class="num" scope="col">Jobs</th></tr></thead>
<tbody>${
    summary.byKind.length
      ? summary.byKind
          .slice(0, 30)
          .map(
            (k) =>
              html`<tr><th scope="row"><a href="/console/jobs?kind=${encodeURIComponent(k.kind)}&amp;status=${k.status}">${k.kind}</a></th><td>${badge(k.status)}</td><td class="num">${k.count}</td></tr>`,
          )
      : html`<tr><td colspan="3" class="muted">No open jobs.</td></tr>`
  }</tbody></table></div>
<h2 id="h-loops">Loops of this process</h2>
<div class="table-wrap"><table aria-labelledby="h-loops">
<thead><tr><th scope="col">Loop</th><th scope="col">Runs here</th><th scope="col">Last tick</th><th scope="col">Last error</th></tr></thead>
<tbody>${loopNames
    .filter((name) => name !== "jobs")
    .map((name) => {
      const state = loops.get(name);
      return html`<tr><th scope="row">${name}</th><td>${
        state
          ? badge("enabled")
          : loopEnabled(settings, name)
            ? html`<span class="muted">not started</span>`
            : badge("disabled")
      }</td><td>${when(state?.lastTickAt)}</td><td>${
        state?.lastError
          ? html`<span class="error-text">${state.lastError}</span> (${when(state.lastErrorAt)})`
          : html`<span class="muted">none</span>`
      }</td></tr>`;
    })}</tbody></table></div>
<div class="grid">
<section class="card" aria-labelledby="h-dead"><h2 id="h-dead">Dead jobs</h2>${
    dead.items.length
      ? html`<ul>${dead.items.map((j) => html`<li><a href="/console/jobs/${j.id}">${j.id} ${j.kind}</a> <span class="muted">${when(j.updatedAt)}</span></li>`)}</ul>${
          dead.nextCursor ? html`<p><a href="/console/jobs?status=dead">All dead jobs</a></p>` : ""
        }`
      : html`<p class="muted">None.</p>`
  }</section>
<section class="card" aria-labelledby="h-domains"><h2 id="h-domains">Domains not Active</h2>${
    domains.length
      ? html`<ul>${domains.map((d) => html`<li><a href="/console/tenants/${d.tenantId}/domains/${d.id}">${d.hostname}</a> ${badge(d.status)} <span class="muted">${d.tenantCode}</span></li>`)}</ul>`
      : html`<p class="muted">None.</p>`
  }</section>
<section class="card" aria-labelledby="h-pastdue"><h2 id="h-pastdue">Tenants past due</h2>${
    pastDue.length
      ? html`<ul>${pastDue.map((t) => html`<li><a href="/console/tenants/${t.tenantId}">${t.tenantCode}</a> <span class="muted">grace ends</span> ${when(t.graceEndsAt)}</li>`)}</ul>`
      : html`<p class="muted">None.</p>`
  }</section>
</div>
</div>`;
}

/** The area (src/http/area.ts) of the platform's overview: the console's first page, no API routes. */
export const overviewArea = defineArea({
  name: "console-overview",
  routes: [],
  consolePages: [
    {
      path: "/console",
      title: "Overview",
      seenBy: STAFF_ROLES,
      routes: (deps) => new Hono<ConsoleEnv>().get("/console", (c) => overviewPage(deps, c)),
    },
  ],
});
