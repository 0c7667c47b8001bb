import { Hono } from "hono";
import { html } from "hono/html";
import { endMemberSessions, listTenantSessions, type TenantSessionView } from "../../auth/user-sessions.ts";
import { applySubscriptionEvent } from "../../billing/apply-subscription-event.ts";
import { builtInFeatures } from "../../billing/catalog.ts";
import { getSubscription } from "../../billing/get-subscription.ts";
import { graceEndsAt, transitionTable } from "../../billing/subscription-states.ts";
import { getUsageReport } from "../../billing/usage-report.ts";
import type { Ctx } from "../../context.ts";
import { listCustomDomains } from "../../custom-domains/list-custom-domains.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { listInvitations } from "../../identity/list-invitations.ts";
import { listTenantUsers } from "../../identity/users.ts";
import {
  createSsoSetupLink,
  listSsoSetupLinks,
  revokeSsoSetupLink,
  SETUP_LINK_DEFAULT_HOURS,
  SETUP_LINK_MAX_HOURS,
  type SsoSetupLinkView,
} from "../../sso/setup-links.ts";
import { getTenant, isUuid, listTenants, tenantCursor } from "../../tenancy/tenants.ts";
import { redactedDestination, type WebhookEndpointView } from "../../webhooks/endpoints.ts";
import { listWebhookEndpoints } from "../../webhooks/list-webhook-endpoints.ts";
import { adminCtxOf, ctxOf } from "../request-context.ts";
import { domainTable } from "./domains-html.ts";
import { actionButton, badge, csrfField, type Html, layout, notice, type Viewer, when } from "./layout.ts";
import { consoleActed, consoleCursor, formOf, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

/** An endpoint's health: disabled (and why), failing since when, or delivering. */
function endpointHealth(e: WebhookEndpointView): Html {
  if (!e.enabled)
    return html`<span class="badge bad">disabled</span> ${e.disabledReason ?? ""} ${e.disabledAt ? when(e.disabledAt) : ""}`;
  if (e.failingSince) return html`<span class="badge warn">failing</span> since ${when(e.failingSince)}`;
  return html`<span class="badge ok">delivering</span>`;
}

/** A count for people: 1,073,741,824 rather than 1073741824. */
const count = (n: number) => n.toLocaleString("en-US");

/** Metered features the application records itself (`recordedBy`), which Plinth never counts. */
const byApplication = (key: string) =>
  builtInFeatures.some((f) => f.key === key && f.recordedBy === "application");

/** The last cell of a usage row: not in the plan, nothing recorded yet, unlimited, or a meter. */
function usageCell(u: { feature: string; enabled: boolean; used: number; limit: number | null }): Html {
  if (!u.enabled) return html`<span class="muted">not in the plan</span>`;
  if (u.used === 0 && byApplication(u.feature)) return html`<span class="muted">nothing recorded yet</span>`;
  return usageMeter(u.used, u.limit);
}

function usageMeter(used: number, limit: number | null): Html {
  if (limit === null) return html`<span class="muted">no limit</span>`;
  return html`<meter min="0" max="${Math.max(limit, 1)}" value="${Math.min(used, Math.max(limit, 1))}" high="${Math.max(limit, 1) * 0.8}" optimum="0" class="meter" aria-label="${used} of ${limit}"></meter>`;
}

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
  const [subscription, usage, users, invitations, sessions, domains, endpoints, setupLinks] =
    await Promise.all([
      getSubscription(deps, tenantCtx),
      getUsageReport(deps, tenantCtx),
      listTenantUsers(deps, tenantCtx, { limit: 100 }),
      listInvitations(deps, tenantCtx, { limit: 100 }),
      listTenantSessions(deps, tenantCtx, { limit: 100 }),
      listCustomDomains(deps, tenantCtx, { limit: 100 }).then((page) => page.items),
      listWebhookEndpoints(deps, tenantCtx, { limit: 100 }).then((page) => page.items),
      listSsoSetupLinks(deps, tenantCtx, { limit: 20 }).then((page) => page.items),
    ]);
  return { tenant, subscription, usage, users, invitations, sessions, domains, endpoints, setupLinks };
}

function tenantSummaryHtml(deps: Pick<Deps, "config">, viewer: Viewer, data: TenantDetail): Html {
  const { tenant, subscription } = data;
  const state = subscription?.status ?? "none";
  const graceDays = deps.config.settings.SaasSubscriptions.PastDueGraceDays;
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
    ? html`<dt>Past due since</dt><dd>${when(subscription?.pastDueSince)}</dd><dt>Grace ends</dt><dd><strong>${when(subscription?.pastDueSince ? graceEndsAt(subscription.pastDueSince, graceDays) : null)}</strong> (then suspended)</dd>`
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

/** The tenant's open sessions, with a button (administrators) that ends every session of a member. */
function memberSessionsHtml(viewer: Viewer, tenantId: string, sessions: TenantSessionView[]): Html {
  return html`<h2 id="h-sessions">Member sessions</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-sessions">
<thead><tr><th scope="col">Member</th><th scope="col">Kind</th><th scope="col">Signed in</th><th scope="col">Last used</th><th scope="col">Client</th><th scope="col">Address</th><th scope="col">End</th></tr></thead>
<tbody>${
    sessions.length
      ? sessions.map(
          (s) =>
            html`<tr><th scope="row">${s.email}</th><td data-label="Kind">${s.kind}${s.impersonatorId ? html` <span class="badge warn">impersonated</span>` : ""}</td><td data-label="Signed in">${when(s.createdAt)}</td><td data-label="Last used">${when(s.lastUsedAt)}</td><td data-label="Client">${s.client ?? "—"}</td><td data-label="Address">${s.address ?? "—"}</td><td data-label="End">${actionButton(viewer, { action: `/console/tenants/${tenantId}/users/${s.userId}/end-sessions`, label: "End the member's sessions", danger: true })}</td></tr>`,
        )
      : html`<tr><td colspan="7" class="muted">No open sessions.</td></tr>`
  }</tbody></table></div>
${sessions.length === 100 ? html`<p class="muted">The 100 most recently used sessions are shown.</p>` : ""}`;
}

function tenantTablesHtml({ usage, users, invitations, domains, endpoints }: TenantDetail): Html {
  return html`<h2 id="h-usage">Usage this period</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-usage">
<thead><tr><th scope="col">Feature</th><th scope="col">Period</th><th class="num" scope="col">Used</th><th class="num" scope="col">Limit</th><th scope="col">Against the limit</th></tr></thead>
<tbody>${
    usage.items.length
      ? usage.items.map(
          (u) =>
            html`<tr><th scope="row">${u.feature}${u.enabled ? "" : html` <span class="badge muted">off</span>`}${byApplication(u.feature) ? html` <span class="badge muted" title="Plinth does not count it: the application records it with recordUsage">recorded by your application</span>` : ""}</th><td data-label="Period">${u.period}</td><td class="num" data-label="Used">${count(u.used)}</td><td class="num" data-label="Limit">${u.enabled && u.limit !== null ? count(u.limit) : "—"}</td><td data-label="Against the limit">${usageCell(u)}</td></tr>`,
        )
      : html`<tr><td colspan="5" class="muted">No metered usage.</td></tr>`
  }</tbody></table></div>
<h2 id="h-users">Members</h2>
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
<h2 id="h-invitations">Invitations</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-invitations">
<thead><tr><th scope="col">E-mail</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Expires</th><th scope="col">Sent</th></tr></thead>
<tbody>${
    invitations.items.length
      ? invitations.items.map(
          (i) =>
            html`<tr><th scope="row">${i.email}</th><td data-label="Role">${i.role}</td><td data-label="State">${badge(i.status)}</td><td data-label="Expires">${when(i.expiresAt)}</td><td data-label="Sent">${when(i.createdAt)}</td></tr>`,
        )
      : html`<tr><td colspan="5" class="muted">No invitations.</td></tr>`
  }</tbody></table></div>
<h2 id="h-domains">Custom domains</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-domains">${domainTable(domains, false)}</table></div>
<h2 id="h-webhooks">Webhook endpoints</h2>
<div class="table-wrap"><table class="stack" aria-labelledby="h-webhooks">
<thead><tr><th scope="col">Destination</th><th scope="col">Events</th><th scope="col">Health</th><th scope="col">Created</th></tr></thead>
<tbody>${
    endpoints.length
      ? endpoints.map(
          (e) =>
            html`<tr><th scope="row"><code>${redactedDestination(e.url)}</code>${e.description ? html`<br><span class="muted">${e.description}</span>` : ""}</th><td data-label="Events">${e.events.join(", ")}</td><td data-label="Health">${endpointHealth(e)}</td><td data-label="Created">${when(e.createdAt)}</td></tr>`,
        )
      : html`<tr><td colspan="4" class="muted">No webhook endpoints.</td></tr>`
  }</tbody></table></div>`;
}

/** A set-up link's state as the list shows it: revoked, expired, opened or waiting. */
function setupLinkState(link: SsoSetupLinkView, now: Date): Html {
  if (link.revokedAt) return html`<span class="badge muted">revoked</span> ${when(link.revokedAt)}`;
  if (new Date(link.expiresAt) <= now) return html`<span class="badge muted">expired</span>`;
  if (link.openedAt) return html`<span class="badge ok">opened</span> ${when(link.openedAt)}`;
  return html`<span class="badge warn">not opened yet</span>`;
}

/**
 * The tenant's SSO set-up links (docs/sso.md "Hand an owner a set-up link"): administrators make one
 * (its link shown once, on the page the form answers with) and revoke them; viewers read the list.
 */
function setupLinksHtml(viewer: Viewer, tenantId: string, links: SsoSetupLinkView[], now: Date): Html {
  const create = viewer.canChange
    ? html`<form class="filters" method="post" action="/console/tenants/${tenantId}/sso-setup-links">${csrfField(viewer)}
<label for="expiresInHours">Valid for (hours)<input id="expiresInHours" name="expiresInHours" type="number" min="1" max="${SETUP_LINK_MAX_HOURS}" value="${SETUP_LINK_DEFAULT_HOURS}" required></label>
<button type="submit">Create SSO set-up link</button>
</form>`
    : "";
  return html`<h2 id="h-sso-links">SSO set-up links</h2>
<p class="muted">A link to this tenant's single sign-on set-up for one of its owners: it grants nothing by itself (the owner signs in to the console first) and stops working when it expires or is revoked.</p>
${create}
<div class="table-wrap"><table class="stack" aria-labelledby="h-sso-links">
<thead><tr><th scope="col">Created</th><th scope="col">Expires</th><th scope="col">State</th><th scope="col">Revoke</th></tr></thead>
<tbody>${
    links.length
      ? links.map(
          (l) =>
            html`<tr><th scope="row">${when(l.createdAt)}</th><td data-label="Expires">${when(l.expiresAt)}</td><td data-label="State">${setupLinkState(l, now)}</td><td data-label="Revoke">${l.revokedAt ? "" : actionButton(viewer, { action: `/console/tenants/${tenantId}/sso-setup-links/${l.id}/revoke`, label: "Revoke", danger: true })}</td></tr>`,
        )
      : html`<tr><td colspan="4" class="muted">No set-up links.</td></tr>`
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
    const message =
      done === "sessions"
        ? "The member's sessions in this tenant ended."
        : done === "linkRevoked"
          ? "The SSO set-up link is revoked: it no longer opens."
          : done
            ? `Subscription ${done}.`
            : undefined;
    const body = html`${notice(message, "ok")}
${tenantSummaryHtml(deps, viewer, data)}
${tenantTablesHtml(data)}
${memberSessionsHtml(viewer, data.tenant.id, data.sessions)}
${setupLinksHtml(viewer, data.tenant.id, data.setupLinks, deps.clock.now())}`;
    return pageResponse(
      c,
      layout({ title: `Tenant ${data.tenant.code}`, section: "/console/tenants", viewer, body }),
    );
  });

  router.post("/console/tenants/:tenantId/users/:userId/end-sessions", async (c) => {
    const { tenantId, userId } = c.req.param();
    if (!isUuid(tenantId) || !isUuid(userId)) throw new AppError("not_found", "No such member.");
    // the same change as DELETE /api/admin/tenants/{tenantId}/users/{userId}/sessions
    const { ended } = await endMemberSessions(deps, adminCtxOf(c, tenantId), { userId });
    consoleActed(deps, c, "auth.session_ended", { type: "user", id: userId }, { count: ended });
    return seeOther(c, `/console/tenants/${tenantId}?done=sessions`);
  });

  // the same change as POST /api/admin/tenants/{tenantId}/sso/setup-links: the link is shown this once
  router.post("/console/tenants/:tenantId/sso-setup-links", async (c) => {
    const tenantId = c.req.param("tenantId");
    if (!isUuid(tenantId)) throw new AppError("not_found", "No such tenant.");
    const hours = (await formOf(c)).expiresInHours?.trim();
    const link = await createSsoSetupLink(deps, adminCtxOf(c, tenantId), {
      expiresInHours: hours ? Number(hours) : undefined,
    });
    consoleActed(deps, c, "sso_setup_link.created", { type: "sso_setup_link", id: link.id });
    const body = html`${notice("SSO set-up link created.", "ok")}
<p>Send this link to one of the tenant's owners now: it is shown this once, and Plinth keeps only its hash. It works until ${when(link.expiresAt)}, for an owner of this tenant signed in to the console.</p>
<p><code class="secret">${link.url}</code></p>
<p><a href="/console/tenants/${tenantId}">Back to the tenant</a></p>`;
    return pageResponse(
      c,
      layout({ title: "SSO set-up link", section: "/console/tenants", viewer: viewerOf(c), body }),
    );
  });
  // the same change as DELETE /api/admin/tenants/{tenantId}/sso/setup-links/{linkId}
  router.post("/console/tenants/:tenantId/sso-setup-links/:linkId/revoke", async (c) => {
    const { tenantId, linkId } = c.req.param();
    if (!isUuid(tenantId) || !isUuid(linkId)) throw new AppError("not_found", "No such set-up link.");
    await revokeSsoSetupLink(deps, adminCtxOf(c, tenantId), { linkId });
    consoleActed(deps, c, "sso_setup_link.revoked", { type: "sso_setup_link", id: linkId });
    return seeOther(c, `/console/tenants/${tenantId}?done=linkRevoked`);
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
