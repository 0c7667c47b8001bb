import { Hono } from "hono";
import { html } from "hono/html";
import {
  getSecurityPolicy,
  type RequireMfa,
  requireMfaValues,
  type SecurityPolicy,
  updateSecurityPolicy,
} from "../../auth/security-policy.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { tenantCtxOf } from "../request-context.ts";
import { csrfField, type Html, layout, notice, type Viewer, when } from "./layout.ts";
import { consoleActed, formOf, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

const SECTION = "/console/security-policy";
const CHOICES: Record<RequireMfa, string> = {
  off: "Nobody: a second factor is each member's choice",
  admins: "Owners and admins",
  everyone: "Every member",
};

function policyBody(viewer: Viewer, policy: SecurityPolicy, saved: boolean): Html {
  return html`${notice(saved ? "Policy saved." : undefined, "ok")}
<p>Who in your tenant must have a second factor (an authenticator app or a passkey). A member the
policy holds who has none may still sign in during the grace period, then every sign-in asks them to
enrol first.${policy.requiredSince ? html` The policy holds them since ${when(policy.requiredSince)}.` : ""}</p>
<form class="stack" method="post" action="${SECTION}">${csrfField(viewer)}
<fieldset><legend>Require a second factor of</legend>
${requireMfaValues.map(
  (value) =>
    html`<label for="require-${value}"><input type="radio" id="require-${value}" name="requireMfa" value="${value}"${policy.requireMfa === value ? html` checked` : ""}> ${CHOICES[value]}</label>`,
)}
</fieldset>
<label for="grace">Grace period for enrolment, in days (0 to 90)<input id="grace" name="enrolmentGraceDays" type="number" min="0" max="90" required value="${policy.enrolmentGraceDays}"></label>
<label for="trusted-devices"><input type="checkbox" id="trusted-devices" name="allowTrustedDevices" value="on"${policy.allowTrustedDevices ? html` checked` : ""}> Let a browser a member trusted at the second-factor step skip it later (30 days by default; unticking revokes every trusted device)</label>
<button type="submit">Save</button>
</form>
<p class="muted">Saving asks for a recent second factor of yours (step-up), as <code>PUT /api/tenant/security-policy</code> does.</p>`;
}

/** The form's values as the API's change (`PUT /api/tenant/security-policy`); 400 naming the field otherwise. */
function policyChange(form: Record<string, string>): {
  requireMfa: RequireMfa;
  enrolmentGraceDays: number;
  allowTrustedDevices: boolean;
} {
  const requireMfa = requireMfaValues.find((value) => value === form.requireMfa);
  const grace = Number(form.enrolmentGraceDays);
  if (!requireMfa)
    throw new AppError("validation_failed", "Choose who must have a second factor.", {
      fields: [{ path: "requireMfa", message: "off, admins or everyone" }],
    });
  if (!Number.isInteger(grace) || grace < 0 || grace > 90)
    throw new AppError("validation_failed", "The grace period is a whole number of days from 0 to 90.", {
      fields: [{ path: "enrolmentGraceDays", message: "0 to 90" }],
    });
  return { requireMfa, enrolmentGraceDays: grace, allowTrustedDevices: form.allowTrustedDevices === "on" };
}

/**
 * `/console/security-policy`: the tenant's second-factor policy for its owners and admins
 * (docs/console.md "Tenant pages"), through `getSecurityPolicy` / `updateSecurityPolicy` as
 * `GET|PUT /api/tenant/security-policy`; the change steps up first (step-up.ts).
 */
export function securityPolicyPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  router.get(SECTION, async (c) => {
    const viewer = viewerOf(c);
    const policy = await getSecurityPolicy(deps, tenantCtxOf(c));
    const body = policyBody(viewer, policy, c.req.query("saved") !== undefined);
    return pageResponse(c, layout({ title: "Security policy", section: SECTION, viewer, body }));
  });
  router.post(SECTION, async (c) => {
    const change = policyChange(await formOf(c));
    await updateSecurityPolicy(deps, tenantCtxOf(c), change);
    consoleActed(
      deps,
      c,
      "tenant.security_policy_changed",
      { type: "tenant", id: tenantCtxOf(c).tenantId },
      change,
    );
    return seeOther(c, `${SECTION}?saved`);
  });
  return router;
}
