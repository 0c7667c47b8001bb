import { html, raw } from "hono/html";
import type { TrustedDeviceView } from "../../auth/trusted-devices.ts";
import { csrfField, type Html, notice, type Viewer, when } from "./layout.ts";

/** What `/console/mfa` shows: the caller's second factors (`getMfaStatus`, as `GET /api/auth/mfa`). */
export interface MfaStatusView {
  methods: string[];
  totp: "none" | "pending" | "enrolled";
  backupCodesLeft: number;
}

export const MFA_DONE: Record<string, string> = {
  removed: "Authenticator removed.",
  untrusted: "Device revoked: its next sign-in asks for a second factor.",
};

const METHOD_NAMES: Record<string, string> = {
  totp: "authenticator app",
  passkey: "passkey",
  backup_code: "backup codes",
};

const postButton = (viewer: Viewer, action: string, label: string, tone = "") =>
  html`<form class="inline" method="post" action="${action}">${csrfField(viewer)}<button type="submit"${tone ? html` class="${tone}"` : ""}>${label}</button></form>`;

/** The overview: which factors a sign-in step offers now, and what can be changed. */
export function mfaBody(
  viewer: Viewer,
  status: MfaStatusView,
  done: string | undefined,
  devices: readonly TrustedDeviceView[],
): Html {
  const offered =
    status.methods.length === 0
      ? html`<p>No second factor yet: your sign-in takes your password alone.</p>`
      : html`<p>A sign-in asks for one of: ${status.methods.map((m) => METHOD_NAMES[m] ?? m).join(", ")}.</p>`;
  const totp =
    status.totp === "enrolled"
      ? html`<p><span class="badge ok">enrolled</span> Your authenticator app gives the codes.</p>
${postButton(viewer, "/console/mfa/totp/remove", "Remove the authenticator", "danger")}`
      : html`<p>${status.totp === "pending" ? html`<span class="badge warn">not confirmed</span> An enrolment was started and never confirmed. ` : ""}Scan a QR code with an authenticator app (1Password, Google Authenticator, …), then confirm with a code it shows.</p>
${postButton(viewer, "/console/mfa/totp", status.totp === "pending" ? "Start again" : "Set up an authenticator app")}`;
  const backup =
    status.methods.length === 0
      ? html`<p class="muted">Backup codes come with a second factor.</p>`
      : html`<p>${status.backupCodesLeft} unused backup code${status.backupCodesLeft === 1 ? "" : "s"} left. A new set replaces them all.</p>
${postButton(viewer, "/console/mfa/backup-codes", "New backup codes", "secondary")}`;
  return html`${notice(done ? MFA_DONE[done] : undefined, "ok")}
${offered}
<h2>Authenticator app</h2>
${totp}
<h2>Backup codes</h2>
${backup}
<h2>Passkeys</h2>
<p>A passkey is a second factor too, and signs you in alone: <a href="/console/passkeys">your passkeys</a>.</p>
<h2>Trusted devices</h2>
${trustedDevicesBody(viewer, devices)}`;
}

/** The browsers that skip the sign-in step (`GET /api/auth/mfa/trusted-devices`), each with a revoke button. */
function trustedDevicesBody(viewer: Viewer, devices: readonly TrustedDeviceView[]): Html {
  const lead = html`<p class="muted">A browser you trusted at a sign-in step skips it while your tenant allows it, until it expires; a sensitive change still asks for a second factor.</p>`;
  if (devices.length === 0) return html`${lead}<p>No trusted devices.</p>`;
  const row = (d: TrustedDeviceView) => html`<tr>
<th scope="row">${when(d.createdAt)}</th>
<td data-label="Client">${d.client ?? html`<span class="muted">—</span>`}</td>
<td data-label="Address">${d.address ?? html`<span class="muted">—</span>`}</td>
<td data-label="Last used">${d.lastUsedAt ? when(d.lastUsedAt) : html`<span class="muted">never</span>`}</td>
<td data-label="Expires">${when(d.expiresAt)}</td>
<td class="actions">${postButton(viewer, `/console/mfa/trusted-devices/${d.id}/revoke`, "Revoke", "danger")}</td>
</tr>`;
  return html`${lead}
<div class="table-wrap"><table class="stack"><thead><tr><th scope="col">Trusted</th><th scope="col">Client</th><th scope="col">Address</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Revoke</th></tr></thead>
<tbody>${devices.map(row)}</tbody></table></div>`;
}

/** The enrolment: the QR code (SVG made by Plinth, no script), the URI once, and the confirm form. */
export function totpEnrolmentBody(
  viewer: Viewer,
  enrolment: { uri: string; qrSvg: string },
  message?: string,
): Html {
  return html`${notice(message, "bad")}
<p>Scan this code with your authenticator app, then enter the six-digit code it shows.</p>
<figure class="qr">${raw(enrolment.qrSvg)}</figure>
<details><summary>Cannot scan it?</summary><p>Add this address in the app instead (shown this once):</p><p><code class="secret">${enrolment.uri}</code></p></details>
<form class="stack" method="post" action="/console/mfa/totp/confirm">${csrfField(viewer)}
<label for="totp-code">Code from the app<input id="totp-code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required autofocus></label>
<button type="submit">Confirm</button>
</form>`;
}

/** The confirm form again after a wrong code (the QR code is not shown twice). */
export function totpConfirmAgainBody(viewer: Viewer, message: string): Html {
  return html`${notice(message, "bad")}
<form class="stack" method="post" action="/console/mfa/totp/confirm">${csrfField(viewer)}
<label for="totp-code">Code from the app<input id="totp-code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required autofocus></label>
<button type="submit">Confirm</button>
</form>
<p><a href="/console/mfa">Start again</a></p>`;
}

/** Ten backup codes, shown this once (the page is never cached). */
export function backupCodesBody(codes: readonly string[], lead: string): Html {
  return html`${notice(lead, "ok")}
<p>Keep these codes somewhere safe: each signs you in once when your authenticator is not at hand. They are shown this once.</p>
<ol class="backup-codes">${codes.map((code) => html`<li><code>${code}</code></li>`)}</ol>
<p><a href="/console/mfa">Done</a></p>`;
}
