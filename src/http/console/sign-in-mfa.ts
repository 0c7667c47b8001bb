import { type Context, Hono } from "hono";
import { html, raw } from "hono/html";
import { browserOriginCheck } from "../../auth/browser-sessions.ts";
import { startStepEnrolment, verifyMfaSignIn } from "../../auth/mfa-sign-in.ts";
import type { MfaRequired } from "../../auth/mfa-step.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { toAppError } from "../problem-json.ts";
import { anonymousCtxOf } from "../request-context.ts";
import { setTrustedDeviceCookie } from "../session-cookie.ts";
import { consoleAssets } from "./assets.ts";
import { type Html, layout, notice } from "./layout.ts";
import { formOf, pageResponse } from "./respond.ts";
import { type ConsoleEnv, enterConsole, originRefused, safeNext, seeOther } from "./session.ts";

/** The second step of a console sign-in: a code from the authenticator, a backup code, or a passkey. */
export function mfaForm(input: {
  mfaToken: string;
  next?: string;
  message?: string;
  qrSvg?: string;
  methods?: string[];
}): Html {
  const { webauthn, passkeys } = consoleAssets();
  const passkey = input.methods?.includes("passkey")
    ? html`<p id="passkey-status" class="notice" role="status" aria-live="polite"></p>
<button type="button" id="passkey-second-factor" class="secondary" data-mfa-token="${input.mfaToken}" data-next="${safeNext(input.next)}">Use a passkey</button>`
    : "";
  return layout({
    title: input.qrSvg ? "Enrol a second factor" : "Second factor",
    scripts: passkey ? [webauthn.path, passkeys.path] : [],
    body: html`<div class="sign-in">
${notice(input.message, "bad")}
${input.qrSvg ? html`<p>Your account must have a second factor. Scan this code with an authenticator app, then enter the code it shows.</p><figure class="qr">${raw(input.qrSvg)}</figure>` : ""}
<form class="stack" method="post" action="/console/sign-in/mfa">
<input type="hidden" name="next" value="${safeNext(input.next)}">
<input type="hidden" name="mfaToken" value="${input.mfaToken}">
<label for="code">Code from your authenticator<input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" autofocus></label>
<label for="backup">Or a backup code<input id="backup" name="backupCode" autocomplete="off"></label>
<label for="trust-device"><input type="checkbox" id="trust-device" name="trustDevice" value="on"> Trust this browser: skip this step here next time (where your tenant allows it)</label>
<button type="submit">Continue</button>
</form>
${passkey}
<p class="muted">This step works once and for a few minutes; then sign in again.</p>
</div>`,
  });
}

/**
 * The console's answer to a sign-in that needs a second factor (no cookie yet); staff without one
 * (held in Production) get the enrolment's QR code (an SVG made here, no script) above the code field.
 */
export async function mfaStepPage(deps: Deps, c: Context<ConsoleEnv>, step: MfaRequired, next?: string) {
  if (!step.enrolmentRequired) return mfaForm({ mfaToken: step.mfaToken, next, methods: step.methods });
  const { qrSvg } = await startStepEnrolment(deps, anonymousCtxOf(c, null), { mfaToken: step.mfaToken });
  return mfaForm({ mfaToken: step.mfaToken, next, qrSvg });
}

/** `POST /console/sign-in/mfa`: completes the step, sets the browser session, goes on. */
export function consoleMfaSignInRoutes(deps: Deps) {
  const originAllowed = browserOriginCheck(deps.config);
  return new Hono<ConsoleEnv>().post("/console/sign-in/mfa", async (c) => {
    if (c.get("tenant")) throw new AppError("not_found", "No such resource.");
    const origin = c.req.header("origin");
    if (!origin || !originAllowed(origin)) throw originRefused(origin);
    const form = await formOf(c);
    const mfaToken = form.mfaToken ?? "";
    const proof = form.backupCode ? { backupCode: form.backupCode } : { code: form.code ?? "" };
    try {
      const done = await verifyMfaSignIn(deps, anonymousCtxOf(c, null), {
        mfaToken,
        ...proof,
        browserAllowed: true,
        trustDevice: form.trustDevice === "on",
      });
      if (done.kind !== "browser") throw new AppError("unauthorized", "Sign in again.");
      if (done.trustedDevice) setTrustedDeviceCookie(c, done.trustedDevice.value, done.trustedDevice.maxAge);
      return seeOther(c, enterConsole(c, deps, done.session, form.next));
    } catch (error) {
      const problem = toAppError(error);
      if (problem.code !== "unauthorized" && problem.code !== "validation_failed") throw error;
      return pageResponse(
        c,
        mfaForm({ mfaToken, next: form.next, message: "The code is wrong, or the step has expired." }),
        401,
      );
    }
  });
}
