import { html } from "hono/html";
import type { DomainView, PlatformDomainView } from "../../custom-domains/domain-view.ts";
import { actionButton, badge, type Html, notice, type Viewer, when } from "./layout.ts";

/** The states the domain list filters by. */
export const DOMAIN_STATUSES = ["Pending", "Failed", "Active"] as const;

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

const domainHead = (withTenant: boolean) =>
  html`<thead><tr><th scope="col">Hostname</th>${withTenant ? html`<th scope="col">Tenant</th>` : ""}<th scope="col">State</th><th scope="col">TLS</th><th scope="col">Last failure</th><th scope="col">Last check</th></tr></thead>`;

/** The head and rows of a domain table (the tenant's column only across tenants). */
export function domainTable(domains: (DomainView & { tenantCode?: string })[], withTenant: boolean): Html {
  return html`${domainHead(withTenant)}<tbody>${domainRows(domains, withTenant)}</tbody>`;
}

/** The domain list: the state filter, the table, and a note when there are more than shown. */
export function domainListBody(input: {
  domains: PlatformDomainView[];
  status: DomainView["status"] | undefined;
  more: boolean;
  shown: number;
}): Html {
  return html`<form class="filters" method="get" action="/console/domains" aria-label="Filter domains">
<label for="d-status">State<select id="d-status" name="status"><option value="">any</option>${DOMAIN_STATUSES.map(
    (s) => html`<option value="${s}"${s === input.status ? html` selected` : ""}>${s}</option>`,
  )}</select></label>
<button type="submit">Filter</button>
</form>
<div class="table-wrap"><table class="stack">${domainTable(input.domains, true)}</table></div>
${input.more ? html`<p class="muted">The newest ${input.shown} are shown; filter by state to see others.</p>` : ""}`;
}

type Verdict = { answered: Html; result: string };

/**
 * What the last check saw for each record (verify-records.ts checks TXT first, then the CNAME, then the
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

/** One domain: its state, the gateway's view, what DNS answered; "Check now" for those who may change. */
export function domainDetailBody(input: {
  domain: PlatformDomainView;
  viewer: Viewer;
  checked: boolean;
}): Html {
  const d = input.domain;
  return html`${notice(input.checked ? "A check is due now: the domain loop runs it at its next tick." : undefined, "ok")}
<div class="actions">${actionButton(input.viewer, { action: `/console/tenants/${d.tenantId}/domains/${d.id}/check`, label: "Check now" })}
<a href="/console/tenants/${d.tenantId}">Tenant ${d.tenantCode}</a></div>
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
}
