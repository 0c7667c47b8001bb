import { z } from "@hono/zod-openapi";
import { tenantRoles } from "../../identity/roles.ts";
import { newBrowserBinding } from "../../sso/browser-binding.ts";
import { createSsoConnection } from "../../sso/connection-create.ts";
import { deleteSsoConnection, updateSsoConnection } from "../../sso/connection-update.ts";
import { getSsoConnection, listSsoConnections } from "../../sso/connections.ts";
import type { SsoDeps } from "../../sso/sso-deps.ts";
import { startTestSignIn } from "../../sso/test-sign-in.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem } from "../openapi.ts";
import { createRouter, tenantCtxOf } from "../request-context.ts";
import { setBindingCookie } from "../sso-binding-cookie.ts";
import { SSO_CONNECTIONS_ACTIONS } from "./sso-connections-actions.ts";

const role = z.enum(tenantRoles);
const claimName = z.string().min(1).max(200);
const options = {
  name: z.string().max(200).optional().openapi({ description: "A label for people (default empty)." }),
  enabled: z.boolean().optional().openapi({
    description:
      "Whether discovery routes the tenant's verified domains here. One connection is enabled at a time (409 when another is); a new one is enabled unless another is.",
  }),
  defaultRole: role.optional().openapi({
    description: "The role of a member provisioned just in time when no group matches (default `member`).",
  }),
  groupRoles: z.record(z.string().min(1).max(200), role).optional().openapi({
    description: "Provider group → tenant role for members provisioned just in time (the highest wins).",
  }),
  claimMapping: z
    .object({ email: claimName.optional(), name: claimName.optional(), groups: claimName.optional() })
    .strict()
    .optional()
    .openapi({
      description:
        "The OIDC claim or SAML attribute names of the address, the name and the groups (defaults `email`, `name`, `groups`).",
    }),
};
const ISSUER_PATTERN = "^https?://[^\\s?#]+$";
const issuer = z
  .string()
  .min(1)
  .max(2048)
  .regex(new RegExp(ISSUER_PATTERN), "an http(s) URL without query or fragment")
  .openapi({
    format: "uri",
    pattern: ISSUER_PATTERN,
    description:
      "The OIDC issuer; `<issuer>/.well-known/openid-configuration` is read at once (https, a public address; 422 naming what failed).",
    example: "https://login.example.com",
  });
const clientId = z.string().min(1).max(512);
const clientSecret = z
  .string()
  .min(1)
  .max(4096)
  .openapi({ description: "Sealed as a tenant secret; never answered." });
// what the metadata must hold, as far as a pattern can say it (well-formed XML is checked on receipt: 422)
const METADATA_PATTERN =
  "^(?=[\\s\\S]*<([\\w.-]+:)?EntityDescriptor[\\s>])(?=[\\s\\S]*<([\\w.-]+:)?IDPSSODescriptor[\\s>])(?=[\\s\\S]*<([\\w.-]+:)?SingleSignOnService[\\s/>])(?=[\\s\\S]*<([\\w.-]+:)?X509Certificate>)[\\s\\S]+$";
const metadataXml = z
  .string()
  .min(1)
  .max(262_144)
  .regex(
    new RegExp(METADATA_PATTERN),
    "SAML metadata: an EntityDescriptor with an IDPSSODescriptor, a SingleSignOnService and an X509Certificate",
  )
  .openapi({
    pattern: METADATA_PATTERN,
    description:
      "The IdP's SAML metadata document: an `EntityDescriptor` with an `IDPSSODescriptor`, its `SingleSignOnService` (HTTP-Redirect) and signing `X509Certificate`.",
  });
const URL_PATTERN = "^https?://\\S+$";
const metadataUrl = z.string().min(1).max(2048).regex(new RegExp(URL_PATTERN), "an http(s) URL").openapi({
  format: "uri",
  pattern: URL_PATTERN,
  description:
    "Where the IdP publishes its metadata (read once, now: https, a public address, no redirects).",
});

const newConnection = z
  .union([
    z
      .object({ type: z.literal("oidc"), issuer, clientId, clientSecret, ...options })
      .strict()
      .openapi("NewOidcConnection"),
    z
      .object({ type: z.literal("saml"), metadataXml, ...options })
      .strict()
      .openapi("NewSamlConnectionFromXml"),
    z
      .object({ type: z.literal("saml"), metadataUrl, ...options })
      .strict()
      .openapi("NewSamlConnectionFromUrl"),
  ])
  .openapi("NewSsoConnection");

const connectionChange = z
  .object({
    ...options,
    issuer: issuer.optional(),
    clientId: clientId.optional(),
    clientSecret: clientSecret
      .optional()
      .openapi({ description: "A replacement client secret (never answered)." }),
    metadataXml: metadataXml.optional(),
    metadataUrl: metadataUrl.optional(),
  })
  .strict()
  .openapi("SsoConnectionChange", {
    description:
      "The fields to change. `issuer`, `clientId`, `clientSecret` apply to OIDC connections, `metadataXml` or `metadataUrl` (the IdP's metadata imported again) to SAML ones; another type's field is a 422.",
  });

const certificate = z.object({
  fingerprint: z.string().nullable().openapi({ description: "SHA-256, colon-separated hex." }),
  notAfter: z.string().nullable(),
});

const connection = z
  .object({
    id: z.uuid(),
    type: z.enum(["oidc", "saml"]),
    name: z.string(),
    enabled: z.boolean(),
    oidc: z
      .object({
        issuer: z.string(),
        clientId: z.string(),
        clientSecretSet: z.boolean(),
        redirectUri: z.string().openapi({ description: "The redirect URI to register at the provider." }),
      })
      .nullable(),
    saml: z
      .object({
        idpEntityId: z.string(),
        idpSsoUrl: z.string(),
        metadataUrl: z.string().nullable(),
        certificates: z.array(certificate),
        spEntityId: z.string().openapi({ description: "The SP entity id (the audience) to give the IdP." }),
        acsUrl: z.string().openapi({ description: "The ACS URL to give the IdP." }),
        spMetadataPath: z.string(),
      })
      .nullable(),
    defaultRole: role,
    groupRoles: z.record(z.string(), role),
    claimMapping: z.object({ email: z.string(), name: z.string(), groups: z.string() }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("SsoConnection");

const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });
const access = tenantAccess(["owner", "admin"], { apiKey: "none" });
const notFound = problem("No such connection in this tenant.");
const gated = problem("`payment_required`: the tenant's plan has no `sso`.");
const stepUp =
  "`unauthorized`, or `step_up_required`: prove a second factor again (`POST /api/auth/mfa/step-up`) first.";

const routes = {
  create: apiRoute(
    access,
    {
      method: "post",
      path: "/api/tenant/sso/connections",
      operationId: "tenantCreateSsoConnection",
      tags: ["tenant"],
      summary: "Add a single sign-on connection: OIDC (issuer, client id and secret) or SAML (IdP metadata).",
      description:
        "OIDC: the issuer's discovery document is read now; the client secret is sealed as a tenant secret and never answered. SAML: the IdP's metadata (given, or read from `metadataUrl`) must name an entity id, an HTTP-Redirect single sign-on URL and a signing certificate. Needs a second factor proved recently (step-up).",
      request: { body: jsonBody(newConnection) },
      responses: {
        201: json("Added.", connection),
        401: problem(stepUp),
        402: gated,
        409: problem("`enabled: true` while another connection of the tenant is enabled."),
        422: problem(
          "`unprocessable`: the issuer or the metadata cannot be used; `errors` name the field and what failed.",
        ),
        503: problem(
          "`unavailable`: the provider could not be reached, or tenant secrets are not configured.",
        ),
      },
    },
    { location: true },
  ),
  list: apiRoute(access, {
    method: "get",
    path: "/api/tenant/sso/connections",
    operationId: "tenantListSsoConnections",
    tags: ["tenant"],
    summary: "The tenant's single sign-on connections, newest first, a page at a time.",
    request: { query: z.object(pageQuery) },
    responses: {
      200: json(
        "A page of connections; pass `nextCursor` as `cursor` for the next one (null on the last page).",
        page(connection).openapi("SsoConnectionList"),
      ),
      400: problem("The limit or the cursor is not valid."),
    },
  }),
  get: apiRoute(access, {
    method: "get",
    path: "/api/tenant/sso/connections/{id}",
    operationId: "tenantGetSsoConnection",
    tags: ["tenant"],
    summary: "One single sign-on connection (never its client secret).",
    request: { params: idParam },
    responses: { 200: json("The connection.", connection), 404: notFound },
  }),
  update: apiRoute(access, {
    method: "patch",
    path: "/api/tenant/sso/connections/{id}",
    operationId: "tenantUpdateSsoConnection",
    tags: ["tenant"],
    summary:
      "Change a connection: name, enabled, default role, group roles, claim mapping, issuer, client, secret, metadata.",
    request: { params: idParam, body: jsonBody(connectionChange) },
    responses: {
      200: json("Changed.", connection),
      401: problem(stepUp),
      402: gated,
      404: notFound,
      409: problem("`enabled: true` while another connection of the tenant is enabled."),
      422: problem("`unprocessable`: another type's field, or an issuer or metadata that cannot be used."),
      503: problem("`unavailable`: the provider could not be reached, or tenant secrets are not configured."),
    },
  }),
  remove: apiRoute(access, {
    method: "delete",
    path: "/api/tenant/sso/connections/{id}",
    operationId: "tenantDeleteSsoConnection",
    tags: ["tenant"],
    summary: "Remove a connection with its client secret: its addresses are no longer routed.",
    request: { params: idParam },
    responses: { 204: { description: "Removed." }, 401: problem(stepUp), 402: gated, 404: notFound },
  }),
  test: apiRoute(
    access,
    {
      method: "post",
      path: "/api/tenant/sso/connections/{id}/test",
      operationId: "tenantTestSsoConnection",
      tags: ["tenant"],
      summary:
        "Start a test sign-in: after the provider, the callback reports every check in words and signs no one in.",
      description:
        "Send the browser to `redirectUrl` (from the browser that made this request: the answer sets the sign-in's browser-binding cookie). After the provider, the OIDC callback or the SAML ACS answers 200 with an `SsoTestReport`: each check (`browser`, `signature`, `issuer`, `audience`, `clock`, `nonce`, `in_response_to`, `email_domain`…) passed or failed, in words, and the profile and role a member would get. No session, no member, no code. The connection may be disabled.",
      request: { params: idParam },
      responses: {
        200: json("Send the browser here.", z.object({ redirectUrl: z.string() }).openapi("SsoTestStart")),
        402: gated,
        404: notFound,
        503: problem("`unavailable`: the provider could not be reached to start the sign-in."),
      },
    },
    { cookies: true },
  ),
};

/** A tenant's single sign-on connections (docs/sso.md, "Connections API"): owners and admins. */
export function ssoConnectionRoutes(deps: SsoDeps) {
  return createRouter()
    .openapi(routes.create, async (c) => {
      const created = await createSsoConnection(deps, tenantCtxOf(c), c.req.valid("json"));
      return c.json(created, 201, { location: `/api/tenant/sso/connections/${created.id}` });
    })
    .openapi(routes.list, async (c) =>
      c.json(await listSsoConnections(deps, tenantCtxOf(c), c.req.valid("query")), 200),
    )
    .openapi(routes.get, async (c) =>
      c.json(await getSsoConnection(deps, tenantCtxOf(c), { id: c.req.valid("param").id }), 200),
    )
    .openapi(routes.update, async (c) =>
      c.json(
        await updateSsoConnection(deps, tenantCtxOf(c), {
          id: c.req.valid("param").id,
          change: c.req.valid("json"),
        }),
        200,
      ),
    )
    .openapi(routes.test, async (c) => {
      c.header("cache-control", "no-store");
      const binding = newBrowserBinding();
      const started = await startTestSignIn(deps, tenantCtxOf(c), {
        id: c.req.valid("param").id,
        browserBinding: binding.hash,
      });
      setBindingCookie(c, started.type, binding);
      return c.json({ redirectUrl: started.redirectUrl }, 200);
    })
    .openapi(routes.remove, async (c) => {
      await deleteSsoConnection(deps, tenantCtxOf(c), { id: c.req.valid("param").id });
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const ssoConnectionsArea = defineArea({
  name: "sso-connections",
  routes: [ssoConnectionRoutes],
  auditActions: SSO_CONNECTIONS_ACTIONS,
});
