import { html, raw } from "hono/html";
import { csrfField, type Html, notice, type Viewer } from "./layout.ts";

/** What `/console/mfa` shows: the caller's second factors (`getMfaStatus`, as `GET /api/auth/mfa`). */
export interface MfaStatusView {
  methods: string[];
  totp: "none" | "pending" | "enrolled";
  backupCodesLeft: number;
}

export const MFA_DONE: Record<string, string> = {
  removed: "Authenticator removed.",
};

const METHOD_NAMES: Record<string, string> = {
  totp: "authenticator app",
  passkey: "passkey",
  backup_code: "backup codes",
};

const postButton = (viewer: Viewer, action: string, label: string, tone = "") =>
  html`<form class="inline" method="post" action="${action}">${csrfField(viewer)}<button type="submit"${tone ? html` class="${tone}"` : ""}>${label}</button></form>`;

/** The overview: which factors a sign-in step offers now, and what can be changed. */
export function mfaBody(viewer: Viewer, status: MfaStatusView, done: string | undefined): Html {
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
<p class="muted">Trusted devices are not offered yet: every sign-in with a second factor asks for it.</p>`;
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
