import { Hono } from "hono";
import { html } from "hono/html";
import { type AuditEventView, auditCursor, listAuditEvents } from "../../audit/read.ts";
import type { Ctx } from "../../context.ts";
import type { Deps } from "../../deps.ts";
import type { Page } from "../../pagination.ts";
import { getTenantCodes, isUuid } from "../../tenancy/tenants.ts";
import { ctxOf } from "../request-context.ts";
import { type Html, layout, notice, when } from "./layout.ts";
import { consoleCursor, instant, pageResponse } from "./respond.ts";
import { type ConsoleEnv, viewerOf } from "./session.ts";

const NAMES = ["chain", "action", "actor", "targetType", "targetId", "from", "to"] as const;
type Fields = Partial<Record<(typeof NAMES)[number], string>>;

/** A uuid shown by its first eight characters (the whole one in its title, and in the filters). */
function shortId(id: string): Html {
  return isUuid(id) ? html`<code title="${id}">${id.slice(0, 8)}…</code>` : html`<code>${id}</code>`;
}

function eventRow(e: AuditEventView, codes: Map<string, string>): Html {
  const tenant = e.tenantId ? (codes.get(e.tenantId) ?? e.tenantId) : null;
  const details = Object.keys(e.details).length ? JSON.stringify(e.details) : "";
  return html`<tr>
<td data-label="Time" class="when">${when(e.occurredAt)}</td>
<td data-label="Chain">${tenant ? html`<a href="/console/tenants/${e.tenantId}">${tenant}</a>` : html`<span class="muted">platform</span>`}</td>
<th scope="row">${e.action}</th>
<td data-label="Actor">${e.actor.type}${e.actor.id ? html` ${shortId(e.actor.id)}` : ""}</td>
<td data-label="Target">${e.target ? html`${e.target.type} ${e.target.id ? shortId(e.target.id) : ""}` : html`<span class="muted">—</span>`}</td>
<td data-label="Outcome"><span class="badge ${e.outcome === "success" ? "ok" : "bad"}">${e.outcome}</span></td>
<td data-label="From">${e.clientAddress ?? html`<span class="muted">—</span>`}</td>
<td data-label="Details" class="details">${details ? html`<code>${details}</code>` : ""}</td>
</tr>`;
}

/** What the audit page shows: the filters as typed, the matching events and their tenants' codes. */
interface AuditPage {
  fields: Fields;
  unknownTenant: boolean;
  events: Page<AuditEventView>;
  codes: Map<string, string>;
}

/** The events the page's filters select (every chain, newest first), 50 at a time. */
async function loadAuditPage(deps: Deps, ctx: Ctx, query: Record<string, string>): Promise<AuditPage> {
  const fields: Fields = {};
  for (const name of NAMES) {
    const value = query[name]?.trim();
    if (value) fields[name] = value.slice(0, 200);
  }
  // `chain` (not `tenant`, the API's tenant selector): a tenant by code or id, `platform` for
  // platform events, every chain when empty
  let tenantId: string | null | undefined;
  let unknownTenant = false;
  if (fields.chain === "platform") tenantId = null;
  else if (fields.chain) {
    if (isUuid(fields.chain)) tenantId = fields.chain.toLowerCase();
    else {
      const found = await deps.tenants.byCode(fields.chain.toLowerCase());
      unknownTenant = !found;
      tenantId = found?.id ?? "00000000-0000-0000-0000-000000000000";
    }
  }
  const events = await listAuditEvents(deps, ctx, {
    tenantId,
    action: fields.action,
    actor: fields.actor,
    targetType: fields.targetType,
    targetId: fields.targetId,
    from: instant(fields.from, "from"),
    to: instant(fields.to, "to"),
    limit: 50,
    cursor: consoleCursor(auditCursor, query.cursor),
  });
  const codes = await getTenantCodes(deps, ctx, {
    ids: events.items.flatMap((e) => (e.tenantId ? [e.tenantId] : [])),
  });
  return { fields, unknownTenant, events, codes };
}

function auditPageHtml(
  { fields, unknownTenant, events, codes }: AuditPage,
  actions: readonly string[],
): Html {
  const more = events.nextCursor
    ? `/console/audit?${new URLSearchParams({ ...(fields as Record<string, string>), cursor: events.nextCursor })}`
    : null;
  return html`${notice(unknownTenant ? "No Active tenant has this code." : undefined, "bad")}
<form class="filters" method="get" action="/console/audit" role="search" aria-label="Filter the audit log">
<label for="a-chain">Tenant (code or id) or "platform"<input id="a-chain" name="chain" value="${fields.chain ?? ""}"></label>
<label for="a-action">Action<select id="a-action" name="action"><option value="">any</option>${actions.map(
    (a) => html`<option value="${a}"${a === fields.action ? html` selected` : ""}>${a}</option>`,
  )}</select></label>
<label for="a-actor">Actor id<input id="a-actor" name="actor" value="${fields.actor ?? ""}"></label>
<label for="a-ttype">Target type<input id="a-ttype" name="targetType" value="${fields.targetType ?? ""}"></label>
<label for="a-tid">Target id<input id="a-tid" name="targetId" value="${fields.targetId ?? ""}"></label>
<label for="a-from">From (UTC)<input id="a-from" name="from" type="text" inputmode="numeric" placeholder="2026-11-26T10:00:00" pattern="\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?" title="UTC, as 2026-11-26T10:00:00" value="${fields.from ?? ""}"></label>
<label for="a-to">Before (UTC)<input id="a-to" name="to" type="text" inputmode="numeric" placeholder="2026-11-26T10:00:00" pattern="\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?" title="UTC, as 2026-11-26T10:00:00" value="${fields.to ?? ""}"></label>
<button type="submit">Filter</button>
<a class="button secondary" href="/console/audit">Clear</a>
</form>
<div class="table-wrap"><table class="stack">
<caption class="muted">${events.items.length} event(s), newest first; each tenant's events form a hash chain (<code>bun run audit:verify</code>)</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Chain</th><th scope="col">Action</th><th scope="col">Actor</th><th scope="col">Target</th><th scope="col">Outcome</th><th scope="col">From</th><th scope="col">Details</th></tr></thead>
<tbody>${events.items.length ? events.items.map((e) => eventRow(e, codes)) : html`<tr><td colspan="8" class="muted">No event matches.</td></tr>`}</tbody>
</table></div>
<nav class="pager" aria-label="Pages">${more ? html`<a href="${more}">Older events</a>` : html`<span class="muted">No older events.</span>`}</nav>`;
}

/** The audit log (docs/audit.md) with its filters, every chain, newest first. */
export function auditPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  router.get("/console/audit", async (c) => {
    // imported when asked, not with the module: the audit area imports this page, the registry the areas
    const { auditActionNames } = await import("../area-registry.ts");
    const body = auditPageHtml(await loadAuditPage(deps, ctxOf(c, null), c.req.query()), auditActionNames());
    return pageResponse(
      c,
      layout({ title: "Audit log", section: "/console/audit", viewer: viewerOf(c), body }),
    );
  });
  return router;
}
