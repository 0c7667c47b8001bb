import { html } from "hono/html";
import type { SsoConnectionView } from "../../sso/connections.ts";
import { badge, csrfField, type Html, type Viewer } from "./layout.ts";

/** Where the SSO page's connection changes post (pages-sso.ts). */
export const CONNECTIONS_PATH = "/console/sso/connections";

const post = (viewer: Viewer, action: string, label: string, tone = "secondary") =>
  html`<form class="inline" method="post" action="${action}">${csrfField(viewer)}<button type="submit" class="${tone}">${label}</button></form>`;

/** What identifies the provider: the OIDC issuer and client id, or the SAML IdP's entity id. */
function providerOf(c: SsoConnectionView): Html {
  if (c.oidc)
    return html`<code>${c.oidc.issuer}</code><br><span class="muted">client ${c.oidc.clientId}; secret ${c.oidc.clientSecretSet ? "set" : "not set"}; redirect URI <code>${c.oidc.redirectUri}</code></span>`;
  if (c.saml)
    return html`<code>${c.saml.idpEntityId}</code><br><span class="muted">ACS <code>${c.saml.acsUrl}</code>; <a href="${CONNECTIONS_PATH}/${c.id}/saml-metadata">SP metadata</a></span>`;
  return html`<span class="muted">none</span>`;
}

const ROLES = ["member", "admin", "owner"] as const;

/** `group = role` lines, one per mapped provider group, as the edit form shows and reads them. */
export const groupRoleLines = (groupRoles: Record<string, string>) =>
  Object.entries(groupRoles)
    .map(([group, role]) => `${group} = ${role}`)
    .join("\n");

/**
 * An owner's edit form of one connection (posted to `…/{id}/edit`): name, default role, group roles;
 * OIDC issuer, client id and a new client secret (left empty, the sealed one stays; it is never shown
 * back); SAML the IdP's metadata imported again (a rolled certificate).
 */
function editForm(viewer: Viewer, c: SsoConnectionView): Html {
  const id = (field: string) => `edit-${c.id}-${field}`;
  const protocol = c.oidc
    ? html`<label for="${id("issuer")}">Issuer<input id="${id("issuer")}" name="issuer" type="url" required maxlength="2048" value="${c.oidc.issuer}"></label>
<label for="${id("client-id")}">Client id<input id="${id("client-id")}" name="clientId" required maxlength="512" value="${c.oidc.clientId}"></label>
<label for="${id("client-secret")}">New client secret (empty: keep the current one)<input id="${id("client-secret")}" name="clientSecret" type="password" maxlength="4096" autocomplete="off"></label>`
    : html`<label for="${id("metadata-url")}">Import the IdP's metadata again from its URL<input id="${id("metadata-url")}" name="metadataUrl" type="url" maxlength="2048"></label>
<label for="${id("metadata-xml")}">Or paste it (empty: keep the current one)<textarea id="${id("metadata-xml")}" name="metadataXml" rows="4" maxlength="262144"></textarea></label>`;
  return html`<details><summary>Edit</summary><form class="stack" method="post" action="${CONNECTIONS_PATH}/${c.id}/edit">${csrfField(viewer)}
<label for="${id("name")}">Name<input id="${id("name")}" name="name" maxlength="200" value="${c.name ?? ""}"></label>
<label for="${id("default-role")}">Role of a new member<select id="${id("default-role")}" name="defaultRole">${ROLES.map((role) => html`<option value="${role}"${role === c.defaultRole ? " selected" : ""}>${role}</option>`)}</select></label>
<label for="${id("group-roles")}">Group roles, one <code>group = role</code> a line<textarea id="${id("group-roles")}" name="groupRoles" rows="3" maxlength="20000">${groupRoleLines(c.groupRoles)}</textarea></label>
${protocol}<button type="submit">Save the connection</button></form></details>`;
}

function connectionRow(viewer: Viewer, owner: boolean, c: SsoConnectionView): Html {
  const base = `${CONNECTIONS_PATH}/${c.id}`;
  const changes = owner
    ? html`${post(viewer, `${base}/test`, "Test sign-in")}${post(viewer, `${base}/${c.enabled ? "disable" : "enable"}`, c.enabled ? "Disable" : "Enable")}${post(viewer, `${base}/delete`, "Delete", "danger")}${editForm(viewer, c)}`
    : "";
  return html`<tr>
<th scope="row">${c.type.toUpperCase()}${c.name ? html`<br><span class="muted">${c.name}</span>` : ""}</th>
<td data-label="Issuer or entity id">${providerOf(c)}</td>
<td data-label="State">${badge(c.enabled ? "enabled" : "disabled")}</td>
<td class="actions">${changes}</td>
</tr>`;
}

/** The forms that add a connection: OIDC (the secret is never shown back) or SAML (metadata or its URL). */
function addForms(viewer: Viewer): Html {
  return html`<h3>Add an OIDC connection</h3>
<form class="stack" method="post" action="${CONNECTIONS_PATH}">${csrfField(viewer)}<input type="hidden" name="type" value="oidc">
<label for="oidc-issuer">Issuer<input id="oidc-issuer" name="issuer" type="url" required maxlength="2048" placeholder="https://login.example.com"></label>
<label for="oidc-client-id">Client id<input id="oidc-client-id" name="clientId" required maxlength="512"></label>
<label for="oidc-client-secret">Client secret<input id="oidc-client-secret" name="clientSecret" type="password" required maxlength="4096" autocomplete="off"></label>
<button type="submit">Add the OIDC connection</button></form>
<h3>Add a SAML connection</h3>
<form class="stack" method="post" action="${CONNECTIONS_PATH}">${csrfField(viewer)}<input type="hidden" name="type" value="saml">
<label for="saml-metadata-url">The IdP's metadata URL<input id="saml-metadata-url" name="metadataUrl" type="url" maxlength="2048" placeholder="https://idp.example.com/metadata"></label>
<label for="saml-metadata-xml">Or its metadata XML, pasted<textarea id="saml-metadata-xml" name="metadataXml" rows="6" maxlength="262144"></textarea></label>
<button type="submit">Add the SAML connection</button></form>`;
}

/** The SSO page's connections: listed for owners and admins, changed by owners. */
export function connectionsPart(viewer: Viewer, owner: boolean, connections: SsoConnectionView[]): Html {
  const table =
    connections.length === 0
      ? html`<p class="muted">No connection yet: no address is routed to an identity provider.</p>`
      : html`<div class="table-wrap"><table class="stack"><thead><tr><th scope="col">Type</th><th scope="col">Issuer or entity id</th><th scope="col">State</th><th scope="col">Change</th></tr></thead>
<tbody>${connections.map((c) => connectionRow(viewer, owner, c))}</tbody></table></div>`;
  return html`<h2>Connections</h2>
<p>Your identity provider (OIDC or SAML): addresses of your verified domains sign in there. One connection is enabled at a time. A test sign-in reports every check and signs no one in.</p>
${table}${owner ? addForms(viewer) : ""}`;
}
