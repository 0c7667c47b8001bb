import type { Context } from "hono";
import { Hono } from "hono";
import { html } from "hono/html";
import { browserOriginCheck, signInBrowser } from "../../auth/browser-sessions.ts";
import { endImpersonation } from "../../auth/impersonation.ts";
import { changePassword } from "../../auth/password-sign-in.ts";
import { revokeCallerSession } from "../../auth/sessions.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../tenancy/tenants.ts";
import { areaConsolePages } from "../area-registry.ts";
import { UNKNOWN_TENANT_ID } from "../middleware/tenancy.ts";
import { statusOf, toAppError } from "../problem-json.ts";
import { anonymousCtxOf, ctxOf } from "../request-context.ts";
import { consoleAssetRoutes, consoleAssets } from "./assets.ts";
import { CONSOLE_POLICY, type Html, layout, notice } from "./layout.ts";
import { passkeySignInRoute } from "./pages-passkeys.ts";
import { consoleActed, formOf, pageResponse } from "./respond.ts";
import {
  type ConsoleEnv,
  clearConsoleCookies,
  consoleSession,
  enterConsole,
  originRefused,
  safeNext,
  seeOther,
} from "./session.ts";
import { consoleMfaSignInRoutes, mfaStepPage } from "./sign-in-mfa.ts";
import { asksForStepUp, stepUpFirst, stepUpPrompt, stepUpRoutes } from "./step-up.ts";

/** Console paths that take a password: the auth rate limit applies as on /api/auth/* (src/app.ts). */
export const CONSOLE_CREDENTIAL_PATHS = [
  "/console/sign-in",
  "/console/sign-in/passkey",
  "/console/sign-in/mfa",
  "/console/password",
] as const;

/** The console paths open without a session: the sign-in page, its passkey sign-in, its second step. */
const OPEN_PATHS = new Set(["/console/sign-in", "/console/sign-in/passkey", "/console/sign-in/mfa"]);

const ERROR_TITLES: Partial<Record<string, string>> = {
  forbidden: "Not allowed",
  not_found: "Not found",
  conflict: "Not possible now",
  validation_failed: "Not valid",
  password_change_required: "Change your password first",
  rate_limited: "Too many attempts",
  payment_required: "Not in your plan",
};

function signInForm(input: {
  message?: string;
  tone?: "ok" | "bad";
  email?: string;
  tenant?: string;
  next?: string;
}): Html {
  const { webauthn, passkeys } = consoleAssets();
  return layout({
    title: "Sign in",
    scripts: [webauthn.path, passkeys.path],
    body: html`<div class="sign-in">
${notice(input.message, input.tone ?? "bad")}
<form class="stack" method="post" action="/console/sign-in">
<input type="hidden" name="next" value="${safeNext(input.next)}">
<label for="email">E-mail<input id="email" name="email" type="email" autocomplete="username webauthn" required value="${input.email ?? ""}" autofocus></label>
<label for="password">Password<input id="password" name="password" type="password" autocomplete="current-password" required></label>
<label for="tenant">Organisation code <span class="muted">(a tenant's owners and admins; empty for platform staff)</span><input id="tenant" name="tenant" autocomplete="organization" maxlength="64" value="${input.tenant ?? ""}"></label>
<button type="submit">Sign in</button>
</form>
<p id="passkey-status" class="notice" role="status" aria-live="polite"></p>
<button type="button" id="passkey-sign-in" class="secondary" data-next="${safeNext(input.next)}">Sign in with a passkey</button>
<p class="muted">For platform staff, and a tenant's owners and admins (their tenant's security and single sign-on). Your session is a browser session (an HttpOnly cookie); every change needs this page's CSRF token.</p>
</div>`,
  });
}

/**
 * The pages this deployment mounts, each declared by its area (`defineArea({ consolePages })`,
 * src/http/area.ts; `bun run areas:check` fails on a page declared anywhere else): Development-only
 * ones only in Development. Every route is behind `consoleSession` (platform staff, whose viewers
 * read, nothing more; a tenant's owners and admins see their tenant's pages and their own account
 * only: session.ts).
 */
const pagesOf = (deps: Deps) =>
  areaConsolePages().filter((page) => !page.developmentOnly || deps.config.environment === "Development");

/** The impersonation banner's button: ends one of the viewer's impersonations (docs/console.md). */
function impersonationRoutes(deps: Deps) {
  return new Hono<ConsoleEnv>().post("/console/impersonations/:sessionId/end", async (c) => {
    const sessionId = c.req.param("sessionId");
    if (!isUuid(sessionId)) throw new AppError("not_found", "No such impersonation.");
    await endImpersonation(deps, ctxOf(c, null), { sessionId });
    consoleActed(deps, c, "auth.impersonation_ended", { type: "session", id: sessionId });
    return seeOther(c, "/console");
  });
}

/** The sign-in page, its password form and its passkey sign-in: open without a session. */
function signInRoutes(deps: Deps, originAllowed: (origin: string) => boolean) {
  const router = new Hono<ConsoleEnv>();
  router.get("/console/sign-in", (c) => {
    if (c.get("tenant")) throw new AppError("not_found", "No such resource.");
    const q = c.req.query();
    const message =
      q.changed !== undefined
        ? "Password changed. Sign in with the new one."
        : q["signed-out"] !== undefined
          ? "Signed out."
          : undefined;
    return pageResponse(c, signInForm({ message, tone: "ok", next: q.next }));
  });

  router.post("/console/sign-in", async (c) => {
    if (c.get("tenant")) throw new AppError("not_found", "No such resource.");
    const origin = c.req.header("origin");
    if (!origin || !originAllowed(origin)) throw originRefused(origin);
    const form = await formOf(c);
    const email = form.email ?? "";
    const code = (form.tenant ?? "").trim().toLowerCase();
    try {
      // no code: platform staff; a code: a tenant's user (an unknown code fails as a wrong password)
      const tenantId = code ? ((await deps.tenants.byCode(code))?.id ?? UNKNOWN_TENANT_ID) : null;
      const session = await signInBrowser(deps, anonymousCtxOf(c, tenantId), {
        email,
        password: form.password ?? "",
      });
      if ("mfaRequired" in session) return pageResponse(c, await mfaStepPage(deps, c, session, form.next));
      return seeOther(c, enterConsole(c, deps, session, form.next));
    } catch (error) {
      const problem = toAppError(error);
      if (problem.code !== "unauthorized" && problem.code !== "validation_failed") throw error;
      return pageResponse(
        c,
        signInForm({ message: "The e-mail or password is wrong.", email, tenant: code, next: form.next }),
        401,
      );
    }
  });

  router.route("/", passkeySignInRoute(deps, originAllowed));
  return router;
}

/**
 * `/console`: the operator console (docs/console.md), server-rendered HTML over the same domain
 * functions the admin API calls. Not API operations: not in the OpenAPI document.
 */
export function consoleRoutes(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  const originAllowed = browserOriginCheck(deps.config);

  // errors as console pages (with the same status the API would give), never as JSON
  router.onError((error, c) => {
    // a change that needs a fresh second factor asks for one and runs again (step-up.ts)
    if (asksForStepUp(c, error) && c.get("viewer")) return stepUpPrompt(deps, c);
    const problem = toAppError(error);
    const status = statusOf[problem.code];
    if (status >= 500) {
      deps.logger.error("console error", {
        requestId: c.get("requestId"),
        path: c.req.path,
        error: deps.redactor.text(error instanceof Error ? error.message : String(error)),
      });
    }
    const title = ERROR_TITLES[problem.code] ?? (status >= 500 ? "Something went wrong" : "Refused");
    const detail = status >= 500 ? "The error is logged with this request's id." : problem.message;
    const body = layout({
      title,
      viewer: c.get("viewer"),
      body: html`${notice(detail, "bad")}<p class="muted">Request id: <code>${c.get("requestId")}</code></p>
<p><a href="/console">Back to the overview</a></p>`,
    });
    const headers: Record<string, string> = {
      "content-security-policy": CONSOLE_POLICY,
      "cache-control": "no-store",
    };
    if (problem.retryAfterSeconds !== undefined) headers["retry-after"] = String(problem.retryAfterSeconds);
    return c.html(body, status as 400, headers);
  });

  router.route("/", consoleAssetRoutes());

  router.route("/", signInRoutes(deps, originAllowed));

  const pages = pagesOf(deps);
  const session = consoleSession(deps, pages);
  // `/console/*` also matches `/console` itself
  router.use("/console/*", async (c, next) => {
    // the sign-in page and the assets are open; everything else is behind the session
    if (OPEN_PATHS.has(c.req.path) || c.req.path.startsWith("/console/assets/")) return next();
    return session(c, next);
  });
  router.use("/console/*", stepUpFirst(deps));

  const passwordForm = (c: Context<ConsoleEnv>, message?: string) => {
    const viewer = c.get("viewer");
    const forced = c.get("identity")?.mustChangePassword ?? false;
    return layout({
      title: "Change your password",
      viewer,
      body: html`<div class="sign-in">
${forced ? notice("Your password was set by someone else: choose your own before you continue.") : ""}
${notice(message, "bad")}
<form class="stack" method="post" action="/console/password">
<input type="hidden" name="csrf" value="${viewer?.csrfToken ?? ""}">
<label for="current">Current password<input id="current" name="currentPassword" type="password" autocomplete="current-password" required autofocus></label>
<label for="new">New password<input id="new" name="newPassword" type="password" autocomplete="new-password" required minlength="12"></label>
<label for="again">New password again<input id="again" name="newPasswordAgain" type="password" autocomplete="new-password" required minlength="12"></label>
<button type="submit">Change password</button>
</form>
<p class="muted">Changing it ends every session of yours, this one too: you sign in again with the new password.</p>
</div>`,
    });
  };
  router.get("/console/password", (c) => pageResponse(c, passwordForm(c)));
  router.post("/console/password", async (c) => {
    const form = await formOf(c);
    if ((form.newPassword ?? "") !== (form.newPasswordAgain ?? ""))
      return pageResponse(c, passwordForm(c, "The two new passwords differ."), 400);
    try {
      await changePassword(deps, ctxOf(c), {
        currentPassword: form.currentPassword ?? "",
        newPassword: form.newPassword ?? "",
      });
    } catch (error) {
      const problem = toAppError(error);
      if (problem.code !== "unauthorized" && problem.code !== "validation_failed") throw error;
      const reason = problem.fields?.map((f) => f.message).join("; ");
      return pageResponse(c, passwordForm(c, reason ? `${problem.message} ${reason}` : problem.message), 400);
    }
    clearConsoleCookies(c);
    return seeOther(c, "/console/sign-in?changed");
  });

  router.post("/console/sign-out", async (c) => {
    await revokeCallerSession(deps, ctxOf(c));
    clearConsoleCookies(c);
    return seeOther(c, "/console/sign-in?signed-out");
  });

  for (const page of pages) router.route("/", page.routes(deps));
  for (const more of [impersonationRoutes, consoleMfaSignInRoutes, stepUpRoutes])
    router.route("/", more(deps));
  return router;
}
