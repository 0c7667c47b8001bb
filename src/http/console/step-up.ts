import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono";
import { html } from "hono/html";
import { getMfaStatus } from "../../auth/mfa-settings.ts";
import { requireRecentSecondFactor, stepUpWithCode } from "../../auth/step-up.ts";
import type { Deps } from "../../deps.ts";
import { toAppError } from "../problem-json.ts";
import { ctxOf } from "../request-context.ts";
import { consoleAssets } from "./assets.ts";
import { csrfField, type Html, layout, notice, type Viewer } from "./layout.ts";
import { formOf, pageResponse } from "./respond.ts";
import { type ConsoleEnv, safeNext, seeOther, viewerOf } from "./session.ts";

/**
 * The console's step-up prompt (RFC 9470, docs/console.md "Step-up"): a console change whose domain
 * function answers `step_up_required` gets this page instead of an error. It carries the change's
 * own form fields (hidden) and posts them back to the change's own action with a second factor
 * beside them; `stepUpFirst` proves that factor on the session (`stepUpWithCode`, as
 * `POST /api/auth/mfa/step-up`) before the change runs again. A passkey goes through the API itself
 * (passkeys.js), then the same form is submitted without a code.
 */

/** Form fields the prompt proves the factor with; never carried into the retried change. */
const FACTOR_FIELDS = ["stepUpCode", "stepUpBackupCode"] as const;
/** Fields never written back into a page: a password typed into the change's form is typed again. */
const SECRET_FIELD = /password|secret/i;
const STEP_UP_PATH = "/console/step-up";

/** The fields of the change to carry through the prompt, and whether one had to be left out. */
function carriedFields(form: Record<string, string>): { fields: [string, string][]; dropped: boolean } {
  const fields: [string, string][] = [];
  let dropped = false;
  for (const [name, value] of Object.entries(form)) {
    if (name === "csrf" || (FACTOR_FIELDS as readonly string[]).includes(name)) continue;
    // an empty secret field (an edit keeping the secret) holds nothing to leave out
    if (SECRET_FIELD.test(name)) dropped ||= value !== "";
    else fields.push([name, value]);
  }
  return { fields, dropped };
}

/** The console page the change was made from (same-origin Referer), to come back to. */
function pageOfChange(c: Context): string {
  try {
    const referer = new URL(c.req.header("referer") ?? "");
    return safeNext(`${referer.pathname}${referer.search}`);
  } catch {
    return "/console";
  }
}

function promptBody(
  viewer: Viewer,
  input: { action: string; fields: [string, string][]; methods: string[]; message?: string; retry: boolean },
): Html {
  const passkey = input.methods.includes("passkey")
    ? html`<p id="passkey-status" class="notice" role="status" aria-live="polite"></p>
<button type="button" id="passkey-step-up" class="secondary" data-form="step-up">Use a passkey</button>`
    : "";
  const code = input.methods.includes("totp")
    ? html`<label for="step-up-code">Code from your authenticator<input id="step-up-code" name="stepUpCode" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" autofocus></label>`
    : "";
  const backup = input.methods.includes("backup_code")
    ? html`<label for="step-up-backup">Or a backup code<input id="step-up-backup" name="stepUpBackupCode" autocomplete="off"></label>`
    : "";
  return html`<div class="sign-in">
${notice(input.message, "bad")}
<p>This change needs a recent second factor. Prove one and ${input.retry ? "the change goes ahead." : "make the change again."}</p>
<form id="step-up" class="stack" method="post" action="${input.action}">${csrfField(viewer)}
${input.fields.map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
${code}
${backup}
<button type="submit">Continue</button>
</form>
${passkey}
</div>`;
}

/**
 * The prompt for the console form post `c` that a domain function refused with `step_up_required`:
 * 401, the factors the user holds, the post's fields carried (none that hold a secret: then the
 * prompt only steps up and returns to the page of the change).
 */
export async function stepUpPrompt(deps: Deps, c: Context<ConsoleEnv>, message?: string): Promise<Response> {
  const viewer = viewerOf(c);
  const { methods } = await getMfaStatus(deps, ctxOf(c));
  const form = c.req.method === "GET" ? c.req.query() : await formOf(c);
  const carried = carriedFields(form);
  const retry = !carried.dropped && c.req.path !== STEP_UP_PATH;
  const action = retry ? c.req.path : STEP_UP_PATH;
  const fields: [string, string][] = retry
    ? carried.fields
    : [["back", c.req.path === STEP_UP_PATH ? safeNext(form.back) : pageOfChange(c)]];
  const { webauthn, passkeys } = consoleAssets();
  return pageResponse(
    c,
    layout({
      title: "Confirm it is you",
      viewer,
      body: promptBody(viewer, { action, fields, methods, message, retry }),
      scripts: methods.includes("passkey") ? [webauthn.path, passkeys.path] : [],
    }),
    c.req.method === "GET" ? 200 : 401,
  );
}

/** Whether the console should answer `error` (from a form post) with the step-up prompt. */
export function asksForStepUp(c: Context, error: unknown): boolean {
  const type = c.req.header("content-type") ?? "";
  return (
    c.req.method === "POST" &&
    type.startsWith("application/x-www-form-urlencoded") &&
    toAppError(error).code === "step_up_required"
  );
}

/**
 * Before a console form post runs: a second factor typed into the prompt (`stepUpCode` or
 * `stepUpBackupCode`) steps the session up first, so the change that follows passes its step-up
 * check. A wrong code shows the prompt again (401) and changes nothing.
 */
export function stepUpFirst(deps: Deps): MiddlewareHandler<ConsoleEnv> {
  return async (c, next) => {
    const type = c.req.header("content-type") ?? "";
    const isForm = c.req.method === "POST" && type.startsWith("application/x-www-form-urlencoded");
    // the open paths (sign-in) have no session to step up
    if (!isForm || !c.get("viewer")) return next();
    const form = await formOf(c);
    const code = form.stepUpCode?.trim();
    const backupCode = form.stepUpBackupCode?.trim();
    if (!code && !backupCode) return next();
    try {
      await stepUpWithCode(deps, ctxOf(c), backupCode ? { backupCode } : { code });
    } catch (error) {
      if (toAppError(error).code !== "unauthorized") throw error;
      return stepUpPrompt(deps, c, "That code is wrong or was used already.");
    }
    return next();
  };
}

/**
 * `GET /console/step-up?back=…`: the prompt by itself, for a change a page's script makes through
 * the API (adding a passkey) that answered 401 `insufficient_user_authentication`. `POST` is the
 * prompt's own target when the change could not be carried: `stepUpFirst` has stepped up; a post
 * without a fresh factor is asked again. Then back to the page, where the change is made again.
 */
export function stepUpRoutes(deps: Deps) {
  return new Hono<ConsoleEnv>()
    .get(STEP_UP_PATH, (c) => stepUpPrompt(deps, c))
    .post(STEP_UP_PATH, async (c) => {
      await requireRecentSecondFactor(deps, ctxOf(c));
      return seeOther(c, safeNext((await formOf(c)).back));
    });
}
