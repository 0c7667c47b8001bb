import { Hono } from "hono";
import { html } from "hono/html";
import { DAY_MS, transitionTable } from "../../billing/subscription-states.ts";
import { applySubscriptionEvent, getTenantSubscription, graceEndsAt } from "../../billing/subscriptions.ts";
import { getUsageReport } from "../../billing/usage-report.ts";
import type { Ctx } from "../../context.ts";
import {
  type DomainView,
  getDomain,
  listDomains,
  listPlatformDomains,
  type PlatformDomainView,
  requestDomainCheck,
} from "../../custom-domains/domains.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { listTenantUsers } from "../../identity/users.ts";
import { getTenant, isUuid, listTenants, tenantCursor } from "../../tenancy/tenants.ts";
import { listWebhookEndpoints, type WebhookEndpointView } from "../../webhooks/endpoints.ts";
import { adminCtxOf, ctxOf } from "../context.ts";
import { actionButton, badge, type Html, layout, notice, type Viewer, when } from "./layout.ts";
import { consoleActed, consoleCursor, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

/**
 * Where an endpoint delivers, without what could be a credential: the query string and any
 * user:password part of the URL are left out (receivers put tokens there).
 */
function destination(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}${u.search ? "?…" : ""}`;
  } catch {
    return "(not a URL)";
  }
}

/** An endpoint's health: disabled (and why), failing since when, or delivering. */
function endpointHealth(e: WebhookEndpointView): Html {
  if (!e.enabled)
    return html`<span class="badge bad">disabled</span> ${e.disabledReason ?? ""} ${e.disabledAt ? when(e.disabledAt) : ""}`;
  if (e.failingSince) return html`<span class="badge warn">failing</span> since ${when(e.failingSince)}`;
  return html`<span class="badge ok">delivering</span>`;
}

/** A count for people: 1,073,741,824 rather than 1073741824. */
const count = (n: number) => n.toLocaleString("en-US");

const DOMAIN_STATUSES = ["Pending", "Failed", "Active"] as const;

function usageMeter(used: number, limit: number | null): Html {
  if (limit === null) return html`<span class="muted">no limit</span>`;
  return html`<meter min="0" max="${Math.max(limit, 1)}" value="${Math.min(used, Math.max(limit, 1))}" high="${Math.max(limit, 1) * 0.8}" optimum="0" class="meter" aria-label="${used} of ${limit}"></meter>`;
}

function domainRows(domains: (DomainView & { tenantCode?: string })[], withTenant: boolean): Html {
  if (domains.length === 0)
    return html`<tr><td colspan="${withTenant ? 6 : 5}" class="muted">No domains.</td></tr>`;
  return html`${domains.map(
    (d) => html`<tr>
<th scope="row"><a href="/console/tenants/${d.tenantId}/domains/${d.id}">${d.hostname}</a></th>
${withTenant ? html`<td data-label="Tenant"><a href="/console/tenants/${d.tenantId}">${d.tenantCode ?? d.tenantId}</a></td>` : ""}
<td data-label="State">${badge(d.status)}</td>
<td data-label="TLS">${d.tls.certificateStatus ?? html`<span class="muted">—</span>`}</td>
<td data-label="Last failure">${d.lastFailure ? d.lastFailure.reason : html`<span class="muted">—</span>`}</td>
<td data-label="Last check">${when(d.lastCheckedAt)}</td>
</tr>`,
  )}`;
}

const DOMAIN_HEAD = (withTenant: boolean) =>
  html`<thead><tr><th scope="col">Hostname</th>${withTenant ? html`<th scope="col">Tenant</th>` : ""}<th scope="col">State</th><th scope="col">TLS</th><th scope="col">Last failure</th><th scope="col">Last check</th></tr></thead>`;

/** The tenant list: a page of tenants whose code or name matches the search. */
async function loadTenantList(deps: Deps, ctx: Ctx, query: Record<string, string>) {
  const search = query.q?.trim().slice(0, 100) || undefined;
  const cursor = consoleCursor(tenantCursor, query.cursor);
  return { search, tenants: await listTenants(deps, ctx, { limit: 50, cursor, search }) };
}

function tenantListHtml({ search, tenants }: Awaited<ReturnType<typeof loadTenantList>>): Html {
  const next = tenants.nextCursor
    ? `/console/tenants?${new URLSearchParams({ ...(search ? { q: search } : {}), cursor: tenants.nextCursor })}`
    : null;
  return html`<form class="filters" method="get" action="/console/tenants" role="search" aria-label="Search tenants">
<label for="q">Code or name<input id="q" name="q" value="${search ?? ""}" type="search"></label>
<button type="submit">Search</button>
</form>
<div class="table-wrap"><table>
<thead><tr><th scope="col">Code</th><th scope="col">Name</th><th scope="col">State</th></tr></thead>
<tbody>${
    tenants.items.length
      ? tenants.items.map(
          (t) =>
            html`<tr><th scope="row"><a href="/console/tenants/${t.id}">${t.code}</a></th><td>${t.name}</td><td>${badge(t.status)}</td></tr>`,
        )
      : html`<tr><td colspan="3" class="muted">No tenant matches.</td></tr>`
  }</tbody></table></div>
<nav class="pager" aria-label="Pages">${next ? html`<a href="${next}">More tenants</a>` : ""}</nav>`;
}

type TenantDetail = Awaited<ReturnType<typeof loadTenantDetail>>;

/** One tenant as its page shows it: account, subscription, usage, the first 100 users, domains, endpoints. */
async function loadTenantDetail(deps: Deps, ctx: Ctx, input: { tenantId: string }) {
  const tenant = await getTenant(deps, ctx, input);
  const tenantCtx = { ...ctx, tenantId: tenant.id };
  const [subscription, usage, users, domains, endpoints] = await Promise.all([
    getTenantSubscription(deps, tenantCtx),
    getUsageReport(deps, tenantCtx),
    listTenantUsers(deps, tenantCtx, { limit: 100 }),
    listDomains(deps, tenantCtx),
    listWebhookEndpoints(deps, tenantCtx),
  ]);
  return { tenant, subscription, usage, users, domains, endpoints };
}

function tenantSummaryHtml(deps: Pick<Deps, "config">, viewer: Viewer, data: TenantDetail): Html {
  const { tenant, subscription } = data;
  const state = subscription?.status ?? "none";
  const graceMs = deps.config.settings.SaasSubscriptions.PastDueGraceDays * DAY_MS;
  const can = transitionTable[state];
  return html`<div class="grid">
<section class="card" aria-labelledby="h-tenant"><h2 id="h-tenant">Tenant</h2><dl class="facts">
<dt>Code</dt><dd>${tenant.code}</dd><dt>Name</dt><dd>${tenant.name}</dd><dt>Account</dt><dd>${badge(tenant.status)}</dd>
<dt>Id</dt><dd><code>${tenant.id}</code></dd>
</dl>
<p><a href="/console/audit?chain=${tenant.id}">Audit log of this tenant</a></p></section>
<section class="card" aria-labelledby="h-sub"><h2 id="h-sub">Plan and subscription</h2><dl class="facts">
<dt>Plan</dt><dd>${subscription?.planCode ?? html`<span class="muted">default plan (no subscription yet)</span>`}</dd>
<dt>State</dt><dd>${badge(state)}</dd>
<dt>Period</dt><dd>${subscription ? html`${when(subscription.currentPeriodStart)} → ${when(subscription.currentPeriodEnd)}` : "—"}</dd>
${
  state === "past_due"
    ? html`<dt>Past due since</dt><dd>${when(subscription?.pastDueSince)}</dd><dt>Grace ends</dt><dd><strong>${when(graceEndsAt(subscription?.pastDueSince ?? null, graceMs))}</strong> (then suspended)</dd>`
    : ""
}
${state === "suspended" ? html`<dt>Suspended</dt><dd>${when(subscription?.suspendedAt)}</dd>` : ""}
</dl>
<div class="actions">${can.suspend ? actionButton(viewer, { action: `/console/tenants/${tenant.id}/suspend`, label: "Suspend", danger: true }) : ""}${
    can.reactivate
      ? actionButton(viewer, { action: `/console/tenants/${tenant.id}/reactivate`, label: "Reactivate" })
      : ""
  }</div></section>
</div>`;
}

function tenantTablesHtml({ usage, users, domains, endpoints }: TenantDetail): Html {
  return html`<h2 id="h-usage">Usage this period</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-usage">
<thead><tr><th scope="col">Feature</th><th scope="col">Period</th><th class="num" scope="col">Used</th><th class="num" scope="col">Limit</th><th scope="col">Against the limit</th></tr></thead>
<tbody>${
    usage.items.length
      ? usage.items.map(
          (u) =>
            html`<tr><th scope="row">${u.feature}${u.enabled ? "" : html` <span class="badge muted">off</span>`}</th><td data-label="Period">${u.period}</td><td class="num" data-label="Used">${count(u.used)}</td><td class="num" data-label="Limit">${u.limit === null ? "—" : count(u.limit)}</td><td data-label="Against the limit">${usageMeter(u.used, u.limit)}</td></tr>`,
        )
      : html`<tr><td colspan="5" class="muted">No metered usage.</td></tr>`
  }</tbody></table></div>
<h2 id="h-users">Users</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-users">
<thead><tr><th scope="col">E-mail</th><th scope="col">Name</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Created</th></tr></thead>
<tbody>${
    users.items.length
      ? users.items.map(
          (u) =>
            html`<tr><th scope="row">${u.email}</th><td data-label="Name">${u.name}</td><td data-label="Role">${u.role ?? "—"}</td><td data-label="State">${badge(u.status)}</td><td data-label="Created">${when(u.createdAt)}</td></tr>`,
        )
      : html`<tr><td colspan="5" class="muted">No users.</td></tr>`
  }</tbody></table></div>
${users.nextCursor ? html`<p class="muted">The first 100 users are shown.</p>` : ""}
<h2 id="h-domains">Custom domains</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-domains">${DOMAIN_HEAD(false)}<tbody>${domainRows(domains, false)}</tbody></table></div>
<h2 id="h-webhooks">Webhook endpoints</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-webhooks">
<thead><tr><th scope="col">Destination</th><th scope="col">Events</th><th scope="col">Health</th><th scope="col">Created</th></tr></thead>
<tbody>${
    endpoints.length
      ? endpoints.map(
          (e) =>
            html`<tr><th scope="row"><code>${destination(e.url)}</code>${e.description ? html`<br><span class="muted">${e.description}</span>` : ""}</th><td data-label="Events">${e.events.join(", ")}</td><td data-label="Health">${endpointHealth(e)}</td><td data-label="Created">${when(e.createdAt)}</td></tr>`,
        )
      : html`<tr><td colspan="4" class="muted">No webhook endpoints.</td></tr>`
  }</tbody></table></div>`;
}

/** Tenants: search, one tenant's plan, subscription, usage, users and domains; suspend and reactivate. */
export function tenantPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/tenants", async (c) => {
    const body = tenantListHtml(await loadTenantList(deps, ctxOf(c, null), c.req.query()));
    return pageResponse(
      c,
      layout({ title: "Tenants", section: "/console/tenants", viewer: viewerOf(c), body }),
    );
  });

  router.get("/console/tenants/:tenantId", async (c) => {
    const viewer = viewerOf(c);
    const data = await loadTenantDetail(deps, ctxOf(c, null), { tenantId: c.req.param("tenantId") });
    const done = c.req.query("done");
    const body = html`${notice(done ? `Subscription ${done}.` : undefined, "ok")}
${tenantSummaryHtml(deps, viewer, data)}
${tenantTablesHtml(data)}`;
    return pageResponse(
      c,
      layout({ title: `Tenant ${data.tenant.code}`, section: "/console/tenants", viewer, body }),
    );
  });

  for (const event of ["suspend", "reactivate"] as const) {
    router.post(`/console/tenants/:tenantId/${event}`, async (c) => {
      const tenantId = c.req.param("tenantId");
      if (!isUuid(tenantId)) throw new AppError("not_found", "No such tenant.");
      // the same change as POST /api/admin/tenants/{tenantId}/subscription/events
      await applySubscriptionEvent(deps, adminCtxOf(c, tenantId), {
        event,
        source: "admin",
        reason: "console",
      });
      consoleActed(deps, c, `subscription.${event}`, { type: "tenant", id: tenantId });
      return seeOther(
        c,
        `/console/tenants/${tenantId}?done=${event === "suspend" ? "suspended" : "reactivated"}`,
      );
    });
  }
  return router;
}

type Verdict = { answered: Html; result: string };

/**
 * What the last check saw for each record (verify.ts checks TXT first, then the CNAME, then the
 * gateway: the first failing step is the one recorded, so a TXT failure leaves the CNAME unseen).
 */
function verdicts(d: DomainView): { txt: Verdict; cname: Verdict } {
  const code = d.lastFailure?.code ?? "";
  const reason = d.lastFailure?.reason ?? "";
  const seenCname: Html = d.cnameTarget ? html`<code>${d.cnameTarget}</code>` : html`no CNAME record`;
  if (d.status === "Active" || code === "gateway_error")
    return {
      txt: { answered: html`the expected value`, result: "match" },
      cname: { answered: seenCname, result: "match" },
    };
  if (!d.lastCheckedAt && !code)
    return {
      txt: { answered: html`<span class="muted">not checked yet</span>`, result: "pending" },
      cname: { answered: html`<span class="muted">not checked yet</span>`, result: "pending" },
    };
  const unseen = {
    answered: html`<span class="muted">not looked up: the TXT step failed first</span>`,
    result: "unknown",
  };
  if (code === "txt_missing")
    return { txt: { answered: html`no TXT record`, result: "missing" }, cname: unseen };
  if (code === "txt_mismatch")
    return { txt: { answered: html`a different value`, result: "mismatch" }, cname: unseen };
  if (code === "dns_nxdomain" || code === "dns_error")
    return { txt: { answered: html`${reason}`, result: "error" }, cname: unseen };
  const txtOk = { answered: html`the expected value`, result: "match" };
  if (code === "cname_missing")
    return { txt: txtOk, cname: { answered: html`no CNAME record`, result: "missing" } };
  if (code === "cname_mismatch") return { txt: txtOk, cname: { answered: seenCname, result: "mismatch" } };
  return { txt: { answered: html`${reason}`, result: code || "unknown" }, cname: unseen };
}

function diagnosis(d: DomainView): Html {
  const { txt, cname } = verdicts(d);
  const tone = (v: Verdict) =>
    html`<span class="badge ${v.result === "match" ? "ok" : v.result === "pending" || v.result === "unknown" ? "muted" : "bad"}">${v.result}</span>`;
  return html`<div class="table-wrap"><table>
<caption class="muted">What DNS answered at the last check, against what Plinth expects</caption>
<thead><tr><th scope="col">Record</th><th scope="col">Expected</th><th scope="col">Answered</th><th scope="col">Result</th></tr></thead>
<tbody>
<tr><th scope="row">TXT <code>${d.verification.name}</code></th><td><code>${d.verification.value}</code></td><td>${txt.answered}</td><td>${tone(txt)}</td></tr>
<tr><th scope="row">CNAME <code>${d.hostname}</code></th><td>${
    d.cnameTargets.length
      ? d.cnameTargets.map((t) => html`<code>${t}</code><br>`)
      : html`<span class="muted">any (no target configured)</span>`
  }</td><td>${cname.answered}</td><td>${tone(cname)}</td></tr>
</tbody></table></div>
<h2>Last failure</h2>
${d.lastFailure ? html`<p><code>${d.lastFailure.code}</code>: ${d.lastFailure.reason}</p>` : html`<p class="muted">None.</p>`}`;
}

/** Domains across tenants by state; one domain's DNS diagnosis and TLS status; check now. */
export function domainPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/domains", async (c) => {
    const viewer = viewerOf(c);
    const q = c.req.query("status");
    const status = (DOMAIN_STATUSES as readonly string[]).includes(q ?? "")
      ? (q as DomainView["status"])
      : undefined;
    const domains: PlatformDomainView[] = await listPlatformDomains(deps, ctxOf(c, null), {
      status,
      limit: 200,
    });
    const body = html`<form class="filters" method="get" action="/console/domains" aria-label="Filter domains">
<label for="d-status">State<select id="d-status" name="status"><option value="">any</option>${DOMAIN_STATUSES.map(
      (s) => html`<option value="${s}"${s === status ? html` selected` : ""}>${s}</option>`,
    )}</select></label>
<button type="submit">Filter</button>
</form>
<div class="table-wrap"><table class="stack">${DOMAIN_HEAD(true)}<tbody>${domainRows(domains, true)}</tbody></table></div>
${domains.length === 200 ? html`<p class="muted">The newest 200 are shown; filter by state to see others.</p>` : ""}`;
    return pageResponse(c, layout({ title: "Domains", section: "/console/domains", viewer, body }));
  });

  router.get("/console/tenants/:tenantId/domains/:id", async (c) => {
    const viewer = viewerOf(c);
    const { tenantId, id } = c.req.param();
    const tenant = await getTenant(deps, ctxOf(c, null), { tenantId });
    const d = await getDomain(deps, adminCtxOf(c, tenant.id), { id });
    const done = c.req.query("done");
    const body = html`${notice(done ? "A check is due now: the domain loop runs it at its next tick." : undefined, "ok")}
<div class="actions">${actionButton(viewer, { action: `/console/tenants/${tenant.id}/domains/${d.id}/check`, label: "Check now" })}
<a href="/console/tenants/${tenant.id}">Tenant ${tenant.code}</a></div>
<div class="grid">
<section class="card" aria-labelledby="h-state"><h2 id="h-state">State</h2><dl class="facts">
<dt>State</dt><dd>${badge(d.status)}</dd>
<dt>Checks</dt><dd>${d.checkAttempts}; last ${when(d.lastCheckedAt)}; next ${when(d.nextCheckAt)}</dd>
<dt>Activated</dt><dd>${when(d.activatedAt)}</dd>
<dt>Claim expires</dt><dd>${when(d.expiresAt)}</dd>
</dl></section>
<section class="card" aria-labelledby="h-tls"><h2 id="h-tls">TLS gateway</h2><dl class="facts">
<dt>Hostname</dt><dd>${d.tls.hostnameStatus ?? html`<span class="muted">not registered</span>`}</dd>
<dt>Certificate</dt><dd>${d.tls.certificateStatus ? badge(d.tls.certificateStatus) : html`<span class="muted">none yet</span>`}</dd>
<dt>Gateway id</dt><dd>${d.tls.gatewayHostnameId ? html`<code>${d.tls.gatewayHostnameId}</code>` : "—"}</dd>
</dl></section>
</div>
<h2>DNS</h2>
${diagnosis(d)}`;
    return pageResponse(c, layout({ title: d.hostname, section: "/console/domains", viewer, body }));
  });

  router.post("/console/tenants/:tenantId/domains/:id/check", async (c) => {
    const { tenantId, id } = c.req.param();
    if (!isUuid(tenantId)) throw new AppError("not_found", "No such domain.");
    // the same call as POST /api/admin/tenants/{tenantId}/domains/{id}/check
    await requestDomainCheck(deps, adminCtxOf(c, tenantId), { id });
    consoleActed(deps, c, "domain.check_requested", { type: "domain", id }, { tenantId });
    return seeOther(c, `/console/tenants/${tenantId}/domains/${id}?done=check`);
  });
  return router;
}
