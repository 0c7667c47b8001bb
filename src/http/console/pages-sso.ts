import { type Context, Hono } from "hono";
import { cachedTenantFeatures } from "../../billing/entitlements.ts";
import type { TenantCtx } from "../../context.ts";
import { withDatabase } from "../../db/operation.ts";
import type { Deps } from "../../deps.ts";
import { publicBaseUrl } from "../../email/links.ts";
import { AppError } from "../../errors.ts";
import { createScimToken, deleteScimToken, listScimTokens } from "../../scim/scim-tokens.ts";
import { newBrowserBinding } from "../../sso/browser-binding.ts";
import { createSsoConnection, type NewSsoConnection } from "../../sso/connection-create.ts";
import {
  deleteSsoConnection,
  type SsoConnectionChange,
  updateSsoConnection,
} from "../../sso/connection-update.ts";
import { findConnectionRow, listSsoConnections, type TenantRoleName } from "../../sso/connections.ts";
import {
  addEmailDomain,
  checkEmailDomain,
  listEmailDomains,
  removeEmailDomain,
} from "../../sso/email-domains.ts";
import { getSsoEnforcement, setSsoEnforcement } from "../../sso/enforcement.ts";
import { getSamlServiceProviderMetadata } from "../../sso/saml/saml-metadata-route.ts";
import { openSsoSetupLink, SETUP_LINK_PATH } from "../../sso/setup-links.ts";
import { openTestReport } from "../../sso/test-report.ts";
import { startTestSignIn } from "../../sso/test-sign-in.ts";
import { isUuid } from "../../tenancy/tenants.ts";
import { statusOf, toAppError } from "../problem-json.ts";
import { tenantCtxOf } from "../request-context.ts";
import { setBindingCookie } from "../sso-binding-cookie.ts";
import { layout } from "./layout.ts";
import { consoleActed, formOf, type PageStatus, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";
import { testReportBody, testStartedBody } from "./sso-test-views.ts";
import { SSO_DONE, SSO_SECTION, type SsoPageData, scimTokenShownBody, ssoBody } from "./sso-views.ts";

/** One page holds every domain and token a tenant has in practice; the API pages beyond. */
const PAGE = { limit: 100 };

/** The page's data, through the functions `GET /api/tenant/email-domains` and `…/scim/tokens` call. */
async function ssoPageData(deps: Deps, ctx: TenantCtx, owner: boolean): Promise<SsoPageData> {
  const { plan, features } = await cachedTenantFeatures(deps, ctx);
  const inPlan = features.sso?.enabled === true;
  if (!inPlan)
    return {
      inPlan,
      plan,
      domains: [],
      enforcement: { enforced: false, breakGlassUserId: null },
      scimTokens: null,
      connections: [],
    };
  const [domains, enforcement, tokens, connections] = await Promise.all([
    listEmailDomains(deps, ctx, PAGE),
    getSsoEnforcement(deps, ctx),
    owner ? listScimTokens(deps, ctx, PAGE) : null,
    listSsoConnections(deps, ctx, PAGE),
  ]);
  return {
    inPlan,
    plan,
    domains: domains.items,
    enforcement,
    scimTokens: tokens?.items ?? null,
    connections: connections.items,
  };
}

/** The SSO settings change only for the tenant's owners (as the API's `tenantAccess(["owner"])`). */
function ownerCtx(c: Context<ConsoleEnv>): TenantCtx {
  if (viewerOf(c).role !== "tenant_owner")
    throw new AppError("forbidden", "Only the tenant's owners change its single sign-on.");
  return tenantCtxOf(c);
}

const idOf = (c: Context<ConsoleEnv>, what: string) => {
  const id = c.req.param("id") ?? "";
  if (!isUuid(id)) throw new AppError("not_found", `No such ${what}.`);
  return id;
};

/** The SSO page; `refused`: what a change's operation refused, in words, with the API's status. */
async function ssoPage(
  deps: Deps,
  c: Context<ConsoleEnv>,
  refused?: { message: string; status: PageStatus },
) {
  const viewer = viewerOf(c);
  const data = await ssoPageData(deps, tenantCtxOf(c), viewer.role === "tenant_owner");
  const key = Object.keys(SSO_DONE).find((k) => c.req.query(k) !== undefined);
  const body = ssoBody(viewer, data, key, refused?.message);
  return pageResponse(
    c,
    layout({ title: "Single sign-on", section: SSO_SECTION, viewer, body }),
    refused?.status ?? 200,
  );
}

/** Refusals of a connection change shown on the SSO page; the rest (402, 403, 404, step-up) as console errors. */
const SHOWN_ON_PAGE = new Set(["validation_failed", "unprocessable", "conflict", "unavailable"]);

/** A SAML connection's metadata (pasted wins over a URL); neither is refused in words. */
function samlInput(form: Record<string, string>): NewSsoConnection {
  const metadataXml = form.metadataXml?.trim();
  const metadataUrl = form.metadataUrl?.trim();
  if (metadataXml) return { type: "saml", metadataXml };
  if (metadataUrl) return { type: "saml", metadataUrl };
  throw new AppError("validation_failed", "Paste the IdP's metadata XML or give its metadata URL.");
}

/** `group = role` lines (or `group: role`) as a connection's `groupRoles`; a line in another form is refused in words. */
function groupRolesOf(text: string): Record<string, TenantRoleName> {
  const roles: Record<string, TenantRoleName> = {};
  for (const line of text.split(/\r?\n/)) {
    if (!line.trim()) continue;
    const match = /^(.+?)\s*[=:]\s*(member|admin|owner)\s*$/.exec(line.trim());
    if (!match?.[1])
      throw new AppError(
        "validation_failed",
        `Group roles: "${line.trim().slice(0, 80)}" is not "group = member|admin|owner".`,
      );
    roles[match[1]] = match[2] as TenantRoleName;
  }
  return roles;
}

/**
 * The change an edit form asks for: the fields every connection has, and its protocol's; an empty
 * client secret or metadata keeps what the connection has (a secret is never shown to be edited).
 */
function connectionChange(type: "oidc" | "saml", form: Record<string, string>): SsoConnectionChange {
  const given = (name: string) => {
    const value = form[name]?.trim();
    return value ? value : undefined;
  };
  const role = form.defaultRole;
  const common: SsoConnectionChange = {
    name: form.name?.trim() ?? "",
    ...(role === "member" || role === "admin" || role === "owner" ? { defaultRole: role } : {}),
    groupRoles: groupRolesOf(form.groupRoles ?? ""),
  };
  if (type === "oidc")
    return {
      ...common,
      issuer: given("issuer"),
      clientId: given("clientId"),
      clientSecret: form.clientSecret ? form.clientSecret : undefined,
    };
  const metadataXml = given("metadataXml");
  return { ...common, ...(metadataXml ? { metadataXml } : { metadataUrl: given("metadataUrl") }) };
}

/**
 * The SSO page's connections (docs/console.md "Tenant pages"): add (OIDC or SAML), edit (rotating
 * the client secret, importing the metadata again), enable, disable, delete, a test sign-in, the SP metadata, through the functions the `/api/tenant/sso/connections`
 * operations call. A refusal of the operation (discovery failed, bad metadata, another enabled) is
 * shown on the page in words.
 */
function connectionPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  const base = `${SSO_SECTION}/connections`;
  const change = async (c: Context<ConsoleEnv>, key: keyof typeof SSO_DONE, run: () => Promise<unknown>) => {
    try {
      await run();
    } catch (error) {
      const problem = toAppError(error);
      if (!SHOWN_ON_PAGE.has(problem.code)) throw error;
      return ssoPage(deps, c, { message: problem.message, status: statusOf[problem.code] as PageStatus });
    }
    return seeOther(c, `${SSO_SECTION}?${key}`);
  };

  router.post(base, async (c) => {
    const form = await formOf(c);
    const ctx = ownerCtx(c);
    return change(c, "connected", async () => {
      const input: NewSsoConnection =
        form.type === "oidc"
          ? {
              type: "oidc",
              issuer: (form.issuer ?? "").trim(),
              clientId: (form.clientId ?? "").trim(),
              clientSecret: form.clientSecret ?? "",
            }
          : samlInput(form);
      const created = await createSsoConnection(deps, ctx, input);
      consoleActed(deps, c, "sso_connection.created", { type: "sso_connection", id: created.id });
    });
  });
  for (const enabled of [true, false])
    router.post(`${base}/:id/${enabled ? "enable" : "disable"}`, async (c) => {
      const id = idOf(c, "connection");
      const ctx = ownerCtx(c);
      return change(c, enabled ? "connectionEnabled" : "connectionDisabled", () =>
        updateSsoConnection(deps, ctx, { id, change: { enabled } }),
      );
    });
  router.post(`${base}/:id/edit`, async (c) => {
    const id = idOf(c, "connection");
    const form = await formOf(c);
    const ctx = ownerCtx(c);
    return change(c, "connectionSaved", async () => {
      const row = await withDatabase(deps, ctx, (db) => findConnectionRow(db, ctx, id));
      await updateSsoConnection(deps, ctx, { id, change: connectionChange(row.type, form) });
      consoleActed(deps, c, "sso_connection.updated", { type: "sso_connection", id });
    });
  });
  router.post(`${base}/:id/delete`, async (c) => {
    const id = idOf(c, "connection");
    await deleteSsoConnection(deps, ownerCtx(c), { id });
    consoleActed(deps, c, "sso_connection.deleted", { type: "sso_connection", id });
    return seeOther(c, `${SSO_SECTION}?connectionDeleted`);
  });
  // a test sign-in: a link on to the provider (form-action 'self' refuses a form post's redirect
  // off the origin); its callback sends the browser back to the report page, signing no one in
  router.post(`${base}/:id/test`, async (c) => {
    const id = idOf(c, "connection");
    const binding = newBrowserBinding();
    const started = await startTestSignIn(deps, ownerCtx(c), {
      id,
      browserBinding: binding.hash,
      reportTo: `${publicBaseUrl(deps.config.settings)}${base}/${id}/test-report`,
    });
    // the callback is accepted only in this browser (login CSRF protection, docs/sso.md)
    setBindingCookie(c, started.type, binding);
    return pageResponse(
      c,
      layout({
        title: "Test sign-in",
        section: SSO_SECTION,
        viewer: viewerOf(c),
        body: testStartedBody(started),
      }),
    );
  });
  router.get(`${base}/:id/test-report`, async (c) => {
    const report = await openTestReport(deps, ownerCtx(c), {
      connectionId: idOf(c, "connection"),
      sealed: c.req.query("report") ?? "",
    });
    return pageResponse(
      c,
      layout({
        title: "Test sign-in report",
        section: SSO_SECTION,
        viewer: viewerOf(c),
        body: testReportBody(report),
      }),
    );
  });
  router.get(`${base}/:id/saml-metadata`, async (c) => {
    const xml = await getSamlServiceProviderMetadata(deps, tenantCtxOf(c), { id: idOf(c, "connection") });
    return c.body(xml, 200, {
      "content-type": "application/samlmetadata+xml",
      "cache-control": "no-store",
      "content-disposition": 'attachment; filename="sp-metadata.xml"',
    });
  });
  return router;
}

/**
 * `/console/sso`: a tenant's enterprise sign-in for its owners (docs/console.md "Tenant pages"):
 * verified e-mail domains (add, check, delete), SSO enforcement, SCIM tokens (create, shown once;
 * rotate; revoke), through the functions the `/api/tenant/email-domains`, `/api/tenant/sso/enforcement`
 * and `/api/tenant/scim/tokens` operations call. Admins read. Without `sso` in the plan the page says
 * so in words.
 */
export function ssoPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  const done = (c: Context<ConsoleEnv>, key: keyof typeof SSO_DONE) => seeOther(c, `${SSO_SECTION}?${key}`);
  const tokenShown = (c: Context<ConsoleEnv>, token: { name: string; token: string }, lead: string) =>
    pageResponse(
      c,
      layout({
        title: "Your SCIM token",
        section: SSO_SECTION,
        viewer: viewerOf(c),
        body: scimTokenShownBody(token, lead),
      }),
    );

  router.get(SSO_SECTION, (c) => ssoPage(deps, c));
  // an SSO set-up link a platform admin made: an owner of its tenant lands on this page; anyone else, 404
  router.get(SETUP_LINK_PATH, async (c) => {
    if (viewerOf(c).role !== "tenant_owner") throw new AppError("not_found", "No such set-up link.");
    const opened = await openSsoSetupLink(deps, tenantCtxOf(c), { token: c.req.query("token") ?? "" });
    consoleActed(deps, c, "sso_setup_link.opened", { type: "sso_setup_link", id: opened.id });
    return done(c, "setupLink");
  });
  router.route("/", connectionPages(deps));

  router.post(`${SSO_SECTION}/domains`, async (c) => {
    const domain = (await formOf(c)).domain ?? "";
    const added = await addEmailDomain(deps, ownerCtx(c), { domain });
    consoleActed(deps, c, "email_domain.added", { type: "email_domain", id: added.id });
    return done(c, "added");
  });
  router.post(`${SSO_SECTION}/domains/:id/check`, async (c) => {
    const id = idOf(c, "e-mail domain");
    await checkEmailDomain(deps, ownerCtx(c), { id });
    consoleActed(deps, c, "email_domain.check_requested", { type: "email_domain", id });
    return done(c, "checked");
  });
  router.post(`${SSO_SECTION}/domains/:id/delete`, async (c) => {
    const id = idOf(c, "e-mail domain");
    await removeEmailDomain(deps, ownerCtx(c), { id });
    consoleActed(deps, c, "email_domain.removed", { type: "email_domain", id });
    return done(c, "removed");
  });

  router.post(`${SSO_SECTION}/enforcement`, async (c) => {
    const enforced = (await formOf(c)).enforced === "true";
    const ctx = ownerCtx(c);
    await setSsoEnforcement(deps, ctx, { enforced });
    consoleActed(deps, c, "sso.enforcement_changed", { type: "tenant", id: ctx.tenantId }, { enforced });
    return done(c, enforced ? "enforced" : "relaxed");
  });

  router.post(`${SSO_SECTION}/scim-tokens`, async (c) => {
    const name = ((await formOf(c)).name ?? "").trim() || "SCIM";
    const created = await createScimToken(deps, ownerCtx(c), { name });
    consoleActed(deps, c, "scim_token.created", { type: "scim_token", id: created.id });
    return tokenShown(c, created, "SCIM token created.");
  });
  // a rotation: a new token of the same name, then the old one revoked (the directory switches to the new one)
  router.post(`${SSO_SECTION}/scim-tokens/:id/rotate`, async (c) => {
    const id = idOf(c, "SCIM token");
    const ctx = ownerCtx(c);
    const old = (await listScimTokens(deps, ctx, PAGE)).items.find((t) => t.id === id);
    if (!old) throw new AppError("not_found", "No such SCIM token.");
    const created = await createScimToken(deps, ctx, { name: old.name });
    await deleteScimToken(deps, ctx, { id });
    consoleActed(deps, c, "scim_token.rotated", { type: "scim_token", id }, { newId: created.id });
    return tokenShown(c, created, "SCIM token rotated: the old one no longer works.");
  });
  router.post(`${SSO_SECTION}/scim-tokens/:id/revoke`, async (c) => {
    const id = idOf(c, "SCIM token");
    await deleteScimToken(deps, ownerCtx(c), { id });
    consoleActed(deps, c, "scim_token.revoked", { type: "scim_token", id });
    return done(c, "revoked");
  });
  return router;
}
