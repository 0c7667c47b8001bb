import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import {
  type BrowserSignIn,
  browserOriginCheck,
  csrfTokenMatches,
  openBrowserSession,
} from "../../auth/browser-sessions.ts";
import type { AuthDeps } from "../../auth/deps.ts";
import { listOpenImpersonations } from "../../auth/impersonation.ts";
import { AppError } from "../../errors.ts";
import {
  mayChangePlatform,
  mayReadPlatform,
  PLATFORM_ADMIN_ROLE,
  PLATFORM_VIEWER_ROLE,
} from "../../identity/roles.ts";
import { SETUP_LINK_PATH } from "../../sso/setup-links.ts";
import type { AppEnv } from "../request-context.ts";
import { readSessionCookie, setSessionCookie } from "../session-cookie.ts";
import type { ConsoleRole, ConsoleSection, Viewer } from "./layout.ts";

/**
 * The console's CSRF token, kept so server-rendered pages can put it in their forms and in htmx's
 * `hx-headers`: HttpOnly like the session cookie (page script never reads it), `__Host-`, Strict.
 * The token itself is checked as the API checks it: by hash, against the browser session.
 */
const CSRF_COOKIE = "__Host-plinth_console_csrf";
const CSRF_HEADER = "x-csrf-token";
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** The console's own-account pages (factors, passkeys, sessions, the step-up prompt): each staff member changes their own there. */
const ownAccount = (path: string) =>
  ["/console/mfa", "/console/passkeys", "/console/sessions", "/console/step-up"].some(
    (own) => path === own || path.startsWith(`${own}/`),
  );
/** The tenant's pages a tenant's owner or admin opens (besides their own account's). */
const tenantPage = (path: string) =>
  ["/console/security-policy", "/console/sso"].some((page) => path === page || path.startsWith(`${page}/`));
/** Where a tenant's owner or admin lands: the console's overview is the platform's. */
export const TENANT_HOME = "/console/security-policy";
/** The console role of a tenant user: owners and admins only (members have no console). */
function tenantConsoleRole(roles: readonly string[]): ConsoleRole | null {
  if (roles.includes("owner")) return "tenant_owner";
  if (roles.includes("admin")) return "tenant_admin";
  return null;
}
/** What a user who must change the password may still reach. */
const BEFORE_CHANGE = new Set(["/console/password", "/console/sign-out"]);

export type ConsoleEnv = {
  Bindings: AppEnv["Bindings"];
  Variables: AppEnv["Variables"] & { viewer?: Viewer };
};

export function setCsrfCookie(c: Context, value: string, maxAge: number): void {
  setCookie(c, CSRF_COOKIE, value, { path: "/", httpOnly: true, secure: true, sameSite: "Strict", maxAge });
}

export function clearConsoleCookies(c: Context): void {
  deleteCookie(c, CSRF_COOKIE, { path: "/", secure: true });
  deleteCookie(c, "__Host-plinth_session", { path: "/", secure: true });
}

/** A redirect after a form post (303, so the browser follows with GET). */
export function seeOther(c: Context, location: string): Response {
  return c.body(null, 303, { location });
}

/**
 * A browser session just opened by a console sign-in (password, second step, passkey): its cookie
 * and CSRF cookie set, and where the console goes next (the forced password change first).
 */
export function enterConsole(
  c: Context<ConsoleEnv>,
  deps: Pick<AuthDeps, "config">,
  session: BrowserSignIn,
  next: string | undefined,
): string {
  setSessionCookie(c, deps.config, session.cookie, session.expiresIn);
  setCsrfCookie(c, session.csrfToken, session.expiresIn);
  return session.passwordChangeRequired ? "/console/password" : safeNext(next);
}

/** Only console paths, so `?next=` cannot send a signed-in user elsewhere. */
export function safeNext(next: string | undefined): string {
  return next && /^\/console(\/[A-Za-z0-9/_.?=&%-]*)?$/.test(next) ? next : "/console";
}

/**
 * The console's door, for every console path but sign-in and the assets: the browser session
 * cookie (the same sessions as `/api/auth/browser/login`), from an allowed origin
 * (`BrowserAuth:AllowedOrigins`) on every state-changing request, with the CSRF token (header or
 * form field) checked against the session; the forced password change first; platform staff
 * only. Viewers (`platform_viewer`) read; the console refuses them every change, as the admin API
 * does (the same `mayChangePlatform`). The viewer it sets carries the `sections` its role sees.
 */
/**
 * The refusal of a console request from an origin not in `BrowserAuth:AllowedOrigins`, naming the
 * origin (parsed, so nothing else of the header is echoed) and the setting that allows it.
 */
export function originRefused(origin: string | undefined): AppError {
  let shown = "";
  try {
    shown = origin ? new URL(origin).origin : "";
  } catch {
    shown = "";
  }
  if (!shown || shown === "null")
    return new AppError("forbidden", "This origin may not use the console: the request names no origin.");
  return new AppError(
    "forbidden",
    `This origin (${shown}) may not use the console: add it to BrowserAuth:AllowedOrigins (e.g. BrowserAuth__AllowedOrigins__0=${shown}).`,
  );
}

export function consoleSession(
  deps: AuthDeps,
  sections: readonly ConsoleSection[],
): MiddlewareHandler<ConsoleEnv> {
  const originAllowed = browserOriginCheck(deps.config);
  return async (c, next) => {
    // the console answers on the platform's hosts only, never on a tenant's custom domain
    if (c.get("tenant")) throw new AppError("not_found", "No such resource.");
    const unsafe = !SAFE_METHODS.has(c.req.method);
    const origin = c.req.header("origin");
    if ((origin !== undefined || unsafe) && !(origin && originAllowed(origin))) throw originRefused(origin);
    const cookie = readSessionCookie(c);
    const csrfToken = getCookie(c, CSRF_COOKIE);
    const toSignIn = () => {
      clearConsoleCookies(c);
      // an htmx request (a refresh) sends the whole page to the sign-in page, not into a fragment
      if (c.req.header("hx-request") === "true")
        return c.body(null, 200, { "hx-redirect": "/console/sign-in" });
      // an SSO set-up link keeps its token (in the query, never in a logged path) through the sign-in
      const back = c.req.path === SETUP_LINK_PATH ? `${c.req.path}${new URL(c.req.url).search}` : c.req.path;
      const next = c.req.method === "GET" ? `?next=${encodeURIComponent(back)}` : "";
      return seeOther(c, `/console/sign-in${next}`);
    };
    if (!cookie || !csrfToken) return toSignIn();
    const found = await openBrowserSession(deps, cookie);
    if ("refused" in found) return toSignIn();
    if (unsafe) {
      let sent = c.req.header(CSRF_HEADER);
      if (sent === undefined) {
        const type = c.req.header("content-type") ?? "";
        if (type.startsWith("application/x-www-form-urlencoded") || type.startsWith("multipart/form-data")) {
          const field = (await c.req.parseBody()).csrf;
          sent = typeof field === "string" ? field : undefined;
        }
      }
      if (!csrfTokenMatches(found, sent)) throw new AppError("forbidden", "Missing or wrong CSRF token.");
    }
    const { identity, sessionId } = found;
    c.set("principal", {
      userId: identity.userId,
      tenantId: identity.tenantId,
      roles: identity.roles,
      platformRoles: identity.platformRoles,
      sessionId,
    });
    c.set("identity", identity);
    const inTenant = identity.tenantId !== null;
    const tenantRole = inTenant ? tenantConsoleRole(identity.roles) : null;
    const canChange = inTenant ? tenantRole !== null : mayChangePlatform(identity.platformRoles);
    const role: ConsoleRole = tenantRole ?? (canChange ? PLATFORM_ADMIN_ROLE : PLATFORM_VIEWER_ROLE);
    const principal = c.get("principal");
    c.set("viewer", {
      email: identity.email,
      canChange,
      role,
      csrfToken,
      tenantCode: identity.tenantCode,
      sections: sections.filter((section) => section.seenBy.includes(role)),
      // only administrators impersonate: a viewer's page costs no look-up
      impersonations:
        canChange && principal && !inTenant
          ? await listOpenImpersonations(deps, {
              tenantId: null,
              actor: {
                type: "user",
                userId: identity.userId,
                sessionId,
                roles: [],
                platformRoles: identity.platformRoles,
              },
            })
          : [],
    });
    if (identity.mustChangePassword && !BEFORE_CHANGE.has(c.req.path)) {
      if (unsafe) throw new AppError("password_change_required", "Change your password first.");
      return seeOther(c, "/console/password");
    }
    if (!BEFORE_CHANGE.has(c.req.path)) {
      if (inTenant) {
        // a tenant's owner or admin: their tenant's pages and their own account, nothing of the platform's
        if (tenantRole === null) {
          // a set-up link answers everyone but an owner alike: not found (no oracle of its token)
          if (c.req.path === SETUP_LINK_PATH) throw new AppError("not_found", "No such set-up link.");
          throw new AppError(
            "forbidden",
            "The console is for platform staff and a tenant's owners and admins.",
          );
        }
        if (c.req.path === "/console" && !unsafe) return seeOther(c, TENANT_HOME);
        if (!tenantPage(c.req.path) && !ownAccount(c.req.path))
          throw new AppError("not_found", "No such resource.");
      } else {
        if (!mayReadPlatform(identity.platformRoles))
          throw new AppError("forbidden", "The console is for platform staff.");
        // a viewer's own account (their passkeys) is theirs to change; the platform is not
        if (unsafe && !canChange && !ownAccount(c.req.path))
          throw new AppError("forbidden", "The platform_viewer role reads; it changes nothing.");
      }
    }
    await next();
  };
}

/** The viewer of a page behind `consoleSession`. */
export function viewerOf(c: Context<ConsoleEnv>): Viewer {
  const viewer = c.get("viewer");
  if (!viewer) throw new AppError("unauthorized");
  return viewer;
}
