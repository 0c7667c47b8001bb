import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import { type PlatformRole, platformRoleNames } from "../../identity/roles.ts";
import { consoleAssets } from "./assets.ts";

export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/**
 * The console's Content-Security-Policy: files from this origin only, no inline script or style,
 * no framing, forms only to this origin. SVG charts are markup (presentation attributes are not
 * style attributes), so they need no exception.
 */
export const CONSOLE_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join("; ");

/**
 * htmx's settings, read from a meta tag (no inline script): no `<style>` injection (the policy
 * would refuse it), no eval (`hx-on`, `js:`), requests only to this origin, no page snapshots in
 * localStorage (console pages hold tenant data).
 */
const HTMX_CONFIG = JSON.stringify({
  includeIndicatorStyles: false,
  allowEval: false,
  allowScriptTags: false,
  selfRequestsOnly: true,
  historyEnabled: false,
  historyCacheSize: 0,
});

/**
 * Who is using the console: platform staff (`platform_admin`, `platform_viewer`), or a tenant's
 * owner or admin, who sees their tenant's pages and their own account only (docs/console.md).
 */
export type ConsoleRole = PlatformRole | "tenant_owner" | "tenant_admin";
export const TENANT_ROLES: readonly ConsoleRole[] = ["tenant_owner", "tenant_admin"];
/** Platform staff: the platform's pages. */
export const STAFF_ROLES: readonly ConsoleRole[] = platformRoleNames;
/** The own-account pages: platform staff and a tenant's owners and admins alike. */
export const EVERYONE: readonly ConsoleRole[] = [...STAFF_ROLES, ...TENANT_ROLES];

/** A section of the console's navigation: a console page, declared by its area (`defineArea({ consolePages })`). */
export interface ConsoleSection {
  /** The page's path; a page names it as its `section` to be marked current. */
  path: string;
  title: string;
  /** The roles that see it in the navigation (and, for a tenant's users, may open it at all). */
  seenBy: readonly ConsoleRole[];
}

export interface Viewer {
  email: string;
  /** `platform_admin`: may change things; `platform_viewer` only reads; a tenant's owner or admin: their tenant's pages say. */
  canChange: boolean;
  role: ConsoleRole;
  /** The tenant of a tenant's owner or admin (null for platform staff). */
  tenantCode?: string | null;
  csrfToken: string;
  /** The sections this viewer's role sees, in order. */
  sections: readonly ConsoleSection[];
  /** The viewer's open impersonation sessions: a banner on every page while there are any. */
  impersonations?: readonly {
    sessionId: string;
    userEmail: string;
    tenantCode: string | null;
    expiresAt: Date;
  }[];
}

/** The banner of open impersonations, each with its end button (docs/console.md). */
function impersonationBanner(viewer: Viewer | undefined): Html {
  const open = viewer?.impersonations ?? [];
  if (!viewer || open.length === 0) return html``;
  return html`<div class="notice bad impersonation" role="status">${open.map(
    (
      i,
    ) => html`<p>You are impersonating <strong>${i.userEmail}</strong> in <code>${i.tenantCode ?? "—"}</code> until ${when(i.expiresAt)}.</p>
<form method="post" action="/console/impersonations/${i.sessionId}/end">${csrfField(viewer)}<button type="submit" class="danger">End the impersonation</button></form>`,
  )}</div>`;
}

/** A whole console page: skip link, navigation, the signed-in user, the CSRF token for htmx. */
export function layout(input: {
  title: string;
  section?: string;
  viewer?: Viewer;
  body: Html;
  /** Script files (console assets' paths) the page adds after htmx, in order. */
  scripts?: readonly string[];
}): Html {
  const { htmx, css } = consoleAssets();
  const { viewer } = input;
  const headers = viewer ? JSON.stringify({ "X-CSRF-Token": viewer.csrfToken }) : undefined;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<meta name="htmx-config" content="${HTMX_CONFIG}">
<title>${input.title} · Plinth console</title>
<link rel="icon" href="/favicon.ico" type="image/svg+xml">
<link rel="stylesheet" href="${css.path}">
<script src="${htmx.path}" defer></script>
${(input.scripts ?? []).map(
  (src) => html`<script src="${src}" defer></script>
`,
)}</head>
<body${headers ? html` hx-headers="${headers}"` : ""}>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/console">Plinth console</a>
${
  viewer
    ? html`<nav aria-label="Sections"><ul>${viewer.sections.map(
        (s) =>
          html`<li><a href="${s.path}"${s.path === input.section ? html` aria-current="page"` : ""}>${s.title}</a></li>`,
      )}</ul></nav>
<div class="who"><span>${viewer.email}${viewer.tenantCode ? html` · <code>${viewer.tenantCode}</code>` : ""} · <span class="badge muted">${viewer.role}</span></span>
<form method="post" action="/console/sign-out">${csrfField(viewer)}<button class="secondary" type="submit">Sign out</button></form></div>`
    : ""
}
</header>
<main id="main" tabindex="-1">
${impersonationBanner(viewer)}
<h1>${input.title}</h1>
${input.body}
</main>
</body>
</html>`;
}

/** The hidden CSRF field every console form carries (htmx also sends it as X-CSRF-Token). */
export function csrfField(viewer: Viewer): Html {
  return html`<input type="hidden" name="csrf" value="${viewer.csrfToken}">`;
}

/**
 * A one-button form for a change; absent (not disabled) for a read-only viewer, so the page offers
 * nothing the role may not do. The server refuses the change anyway.
 */
export function actionButton(
  viewer: Viewer,
  input: { action: string; label: string; danger?: boolean; fields?: Record<string, string> },
): Html {
  if (!viewer.canChange) return html``;
  return html`<form method="post" action="${input.action}">${csrfField(viewer)}${Object.entries(
    input.fields ?? {},
  ).map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`,
  )}<button type="submit"${input.danger ? html` class="danger"` : ""}>${input.label}</button></form>`;
}

export function when(value: Date | string | null | undefined): Html {
  if (!value) return html`<span class="muted">—</span>`;
  const date = typeof value === "string" ? new Date(value) : value;
  const text = date
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d{3}Z$/, "Z");
  return html`<time datetime="${date.toISOString()}">${text}</time>`;
}

const TONE: Record<string, string> = {
  succeeded: "ok",
  Active: "ok",
  active: "ok",
  trialing: "ok",
  pending: "muted",
  processing: "warn",
  failed: "warn",
  Pending: "warn",
  past_due: "warn",
  dead: "bad",
  canceled: "muted",
  Failed: "bad",
  Suspended: "bad",
  suspended: "bad",
  enabled: "ok",
  disabled: "muted",
  verified: "ok",
};

export function badge(value: string): Html {
  return html`<span class="badge ${TONE[value] ?? "muted"}">${value}</span>`;
}

export function notice(text: string | undefined, tone: "ok" | "bad" | "info" = "info"): Html {
  if (!text) return html``;
  return html`<p class="notice ${tone === "info" ? "" : tone}" role="status">${text}</p>`;
}

/** JSON pretty-printed for a `<pre>` (escaped by the template). */
export function pretty(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? "null";
}
