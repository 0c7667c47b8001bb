import { html } from "hono/html";
import type { SsoTestReport } from "../../sso/finish-sign-in.ts";
import { type Html, notice } from "./layout.ts";
import { SSO_SECTION } from "./sso-views.ts";

/**
 * A test sign-in started: the link on to the identity provider. A link, not a redirect of the
 * form post: the console's `form-action 'self'` refuses a form whose redirect leaves the origin.
 */
export function testStartedBody(input: { redirectUrl: string; type: "oidc" | "saml" }): Html {
  const provider = input.type === "oidc" ? "OpenID provider" : "SAML identity provider";
  return html`${notice("Test sign-in started.", "ok")}
<p>Sign in at your ${provider} as a person of one of your verified domains. You come back here to a report of every check and of the role that person would get. Nobody is signed in to Plinth and no member is created.</p>
<p><a class="button" id="continue-to-provider" href="${input.redirectUrl}" rel="noreferrer">Continue to the identity provider</a></p>
<p><a href="${SSO_SECTION}">Back to single sign-on</a></p>`;
}

/** A finished test sign-in: passed or the check that failed, every check in words, and who signed in. */
export function testReportBody(report: SsoTestReport): Html {
  const failed = report.checks.find((check) => !check.ok);
  const profile = report.profile;
  const lead = report.ok
    ? notice(
        `Test sign-in passed: ${profile?.email ?? "this person"} would sign in as ${profile?.role ?? "a member"}.`,
        "ok",
      )
    : notice(`Test sign-in failed (${failed?.check ?? "a check"}): ${failed?.detail ?? ""}`, "bad");
  const rows = report.checks.map(
    (check) => html`<tr><th scope="row"><code>${check.check}</code></th>
<td data-label="Result"><span class="badge ${check.ok ? "ok" : "bad"}">${check.ok ? "passed" : "failed"}</span></td>
<td data-label="What was checked">${check.detail}</td></tr>`,
  );
  const claims = profile
    ? html`<h2>What the provider said</h2>
<dl class="facts">
<dt>Subject</dt><dd><code>${profile.subject}</code></dd>
<dt>E-mail</dt><dd>${profile.email}</dd>
<dt>Name</dt><dd>${profile.name || html`<span class="muted">none</span>`}</dd>
<dt>Groups</dt><dd>${profile.groups.length ? profile.groups.join(", ") : html`<span class="muted">none</span>`}</dd>
<dt>Role a new member would get</dt><dd><strong>${profile.role}</strong></dd>
</dl>`
    : "";
  return html`${lead}
<h2>Checks</h2>
<div class="table-wrap"><table class="stack"><thead><tr><th scope="col">Check</th><th scope="col">Result</th><th scope="col">What was checked</th></tr></thead>
<tbody>${rows}</tbody></table></div>
${claims}
<p class="muted">A test sign-in signs nobody in to Plinth: no session, no member, no sign-in code.${report.ok ? "" : " The failure is in the audit log too."}</p>
<p><a href="${SSO_SECTION}">Back to single sign-on</a></p>`;
}
