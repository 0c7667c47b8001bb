import { html } from "hono/html";
import type { ScimTokenView } from "../../scim/scim-tokens.ts";
import type { SsoConnectionView } from "../../sso/connections.ts";
import type { EmailDomainView } from "../../sso/email-domains.ts";
import type { SsoEnforcement } from "../../sso/enforcement.ts";
import { badge, csrfField, type Html, notice, type Viewer, when } from "./layout.ts";
import { connectionsPart } from "./sso-connections-views.ts";

export const SSO_SECTION = "/console/sso";

/** What the SSO page shows: read by pages-sso.ts through the functions the API calls. */
export interface SsoPageData {
  /** Whether the tenant's plan has `sso`; without it the page says so and offers no change. */
  inPlan: boolean;
  plan: string;
  domains: EmailDomainView[];
  enforcement: SsoEnforcement;
  /** The tenant's SCIM tokens: owners only (null for an admin, who does not manage them). */
  scimTokens: ScimTokenView[] | null;
  /** The tenant's SSO connections (owners change them, admins read). */
  connections: SsoConnectionView[];
}

export const SSO_DONE: Record<string, string> = {
  added: "Domain added: publish the TXT record below, then check it.",
  checked: "Domain checked.",
  removed: "Domain removed.",
  enforced: "SSO is enforced for your verified domains.",
  relaxed: "SSO is no longer enforced.",
  revoked: "SCIM token revoked: it no longer works.",
  connected: "Connection added.",
  connectionEnabled: "Connection enabled: sign-in routes your verified domains to it.",
  connectionDisabled: "Connection disabled: no address is routed to it.",
  connectionDeleted: "Connection deleted with its client secret.",
  connectionSaved: "Connection saved. Run a test sign-in to prove it.",
  setupLink:
    "Welcome: your platform's operator sent you here to set up single sign-on. Verify your e-mail domains, add your identity provider's connection, run a test sign-in, then enforce it if you wish.",
};

/** The plan message of a tenant whose plan has no `sso`, in words (not an error). */
export function notInPlan(plan: string): Html {
  return html`<p class="notice" role="status">Single sign-on, verified e-mail domains and SCIM provisioning are not in your plan (<code>${plan}</code>). They come with a plan that includes <strong>sso</strong> (the enterprise plan): change the plan, then come back here.</p>`;
}

const post = (viewer: Viewer, action: string, label: string, tone = "secondary") =>
  html`<form class="inline" method="post" action="${action}">${csrfField(viewer)}<button type="submit" class="${tone}">${label}</button></form>`;

function domainRow(viewer: Viewer, owner: boolean, d: EmailDomainView): Html {
  const changes = owner
    ? html`${d.status === "verified" ? "" : post(viewer, `${SSO_SECTION}/domains/${d.id}/check`, "Check now")}${post(viewer, `${SSO_SECTION}/domains/${d.id}/delete`, "Delete", "danger")}`
    : "";
  return html`<tr>
<th scope="row">${d.domain}</th>
<td data-label="State">${badge(d.status)}${d.lastFailure ? html`<br><span class="muted">${d.lastFailure.reason}</span>` : ""}</td>
<td data-label="TXT record"><code>${d.verification.name}</code><br><code>${d.verification.value}</code></td>
<td data-label="Verified">${when(d.verifiedAt)}</td>
<td data-label="Last checked">${when(d.lastCheckedAt)}</td>
<td class="actions">${changes}</td>
</tr>`;
}

function domainsPart(viewer: Viewer, owner: boolean, domains: EmailDomainView[]): Html {
  const table =
    domains.length === 0
      ? html`<p class="muted">No e-mail domain yet.</p>`
      : html`<div class="table-wrap"><table class="stack"><thead><tr><th scope="col">Domain</th><th scope="col">State</th><th scope="col">TXT record (name, value)</th><th scope="col">Verified</th><th scope="col">Last checked</th><th scope="col">Change</th></tr></thead>
<tbody>${domains.map((d) => domainRow(viewer, owner, d))}</tbody></table></div>`;
  const add = owner
    ? html`<form class="stack" method="post" action="${SSO_SECTION}/domains">${csrfField(viewer)}
<label for="domain">Add a domain your members' addresses are in<input id="domain" name="domain" required maxlength="253" placeholder="example.com"></label>
<button type="submit">Add the domain</button></form>`
    : "";
  return html`<h2>Verified e-mail domains</h2>
<p>Prove your organisation owns a domain with a DNS TXT record: sign-in routes its addresses to your SSO connection.</p>
${table}${add}`;
}

function enforcementPart(viewer: Viewer, owner: boolean, enforcement: SsoEnforcement): Html {
  const state = enforcement.enforced
    ? html`<p><span class="badge ok">enforced</span> Addresses of your verified domains sign in through SSO only (password and e-mail codes refused); the break-glass owner may still use a password.</p>`
    : html`<p><span class="badge muted">not enforced</span> Members may also sign in with a password or an e-mail code.</p>`;
  const toggle = owner
    ? html`<form method="post" action="${SSO_SECTION}/enforcement">${csrfField(viewer)}<input type="hidden" name="enforced" value="${enforcement.enforced ? "false" : "true"}"><button type="submit"${enforcement.enforced ? html` class="danger"` : ""}>${enforcement.enforced ? "Stop enforcing SSO" : "Enforce SSO (you stay the break-glass owner)"}</button></form>`
    : "";
  return html`<h2>Enforcement</h2>${state}${toggle}`;
}

function scimPart(viewer: Viewer, tokens: ScimTokenView[] | null): Html {
  if (tokens === null)
    return html`<h2>SCIM tokens</h2><p class="muted">SCIM tokens are managed by the tenant's owners.</p>`;
  const rows = tokens.map(
    (
      t,
    ) => html`<tr><th scope="row">${t.name}</th><td data-label="Prefix"><code>${t.prefix}</code></td><td data-label="Created">${when(t.createdAt)}</td><td data-label="Last used">${when(t.lastUsedAt)}</td>
<td class="actions">${post(viewer, `${SSO_SECTION}/scim-tokens/${t.id}/rotate`, "Rotate")}${post(viewer, `${SSO_SECTION}/scim-tokens/${t.id}/revoke`, "Revoke", "danger")}</td></tr>`,
  );
  const table =
    tokens.length === 0
      ? html`<p class="muted">No SCIM token: no directory provisions your members.</p>`
      : html`<div class="table-wrap"><table class="stack"><thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Change</th></tr></thead><tbody>${rows}</tbody></table></div>`;
  return html`<h2>SCIM tokens</h2>
<p>Your identity provider (Okta, Entra ID) provisions members at <code>/scim/v2</code> with one of these bearer tokens.</p>
${table}
<form class="stack" method="post" action="${SSO_SECTION}/scim-tokens">${csrfField(viewer)}
<label for="scim-name">Name<input id="scim-name" name="name" required maxlength="100" value="SCIM"></label>
<button type="submit">Create a SCIM token</button></form>`;
}

/** The whole SSO page. */
export function ssoBody(viewer: Viewer, data: SsoPageData, done: string | undefined, refused?: string): Html {
  if (!data.inPlan) return notInPlan(data.plan);
  const owner = viewer.role === "tenant_owner";
  return html`${notice(done ? SSO_DONE[done] : undefined, "ok")}${notice(refused, "bad")}
${owner ? "" : html`<p class="muted">You read these settings; the tenant's owners change them.</p>`}
${connectionsPart(viewer, owner, data.connections)}
${domainsPart(viewer, owner, data.domains)}
${enforcementPart(viewer, owner, data.enforcement)}
${scimPart(viewer, data.scimTokens)}`;
}

/** A SCIM token, shown this once (the page is never cached). */
export function scimTokenShownBody(token: { name: string; token: string }, lead: string): Html {
  return html`${notice(lead, "ok")}
<p>Copy the token into your identity provider now: it is shown this once, and Plinth keeps only its hash.</p>
<p><code class="secret">${token.token}</code></p>
<p><a href="${SSO_SECTION}">Done</a></p>`;
}
