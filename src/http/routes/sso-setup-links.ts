import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import {
  createSsoSetupLink,
  listSsoSetupLinks,
  revokeSsoSetupLink,
  SETUP_LINK_DEFAULT_HOURS,
  SETUP_LINK_MAX_HOURS,
} from "../../sso/setup-links.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem, tenantIdParam } from "../openapi.ts";
import { adminCtxOf, createRouter } from "../request-context.ts";
import { SSO_SETUP_LINKS_ACTIONS } from "./sso-setup-links-actions.ts";

const newSetupLink = z
  .object({
    expiresInHours: z
      .number()
      .int()
      .min(1)
      .max(SETUP_LINK_MAX_HOURS)
      .optional()
      .openapi({
        description: `How long the link works (default ${SETUP_LINK_DEFAULT_HOURS}, at most ${SETUP_LINK_MAX_HOURS}).`,
      }),
  })
  .openapi("NewSsoSetupLink");
const createdSetupLink = z
  .object({
    id: z.uuid(),
    url: z.string().openapi({
      description:
        "The console link to hand the tenant's owner, shown only in this answer: it carries a 256-bit token and grants nothing by itself (an owner of the tenant signed in to the console opens it).",
    }),
    expiresAt: z.string(),
  })
  .openapi("CreatedSsoSetupLink");
const setupLink = z
  .object({
    id: z.uuid(),
    createdAt: z.string(),
    createdBy: z.uuid().nullable().openapi({ description: "The platform admin who made it." }),
    expiresAt: z.string(),
    openedAt: z
      .string()
      .nullable()
      .openapi({ description: "The first time an owner of the tenant opened it." }),
    revokedAt: z.string().nullable(),
  })
  .openapi("SsoSetupLink");
const linkIdParam = z.object({ linkId: z.string().openapi({ param: { name: "linkId", in: "path" } }) });

const create = apiRoute(
  "platform",
  {
    method: "post",
    path: "/api/admin/tenants/{tenantId}/sso/setup-links",
    operationId: "adminCreateSsoSetupLink",
    tags: ["admin"],
    summary:
      "Make a time-limited link to the tenant's single sign-on set-up in the console, for one of its owners (the link is shown only here).",
    request: {
      params: tenantIdParam,
      body: { ...jsonBody(newSetupLink), required: false },
    },
    responses: {
      201: json("Created: the link, shown this once.", createdSetupLink),
      400: problem(`\`expiresInHours\` is not a whole number from 1 to ${SETUP_LINK_MAX_HOURS}.`),
      402: problem("`payment_required`: the tenant's plan has no `sso` (enterprise sign-in)."),
      404: problem("No such tenant."),
    },
  },
  { location: true },
);
const list = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/sso/setup-links",
  operationId: "adminListSsoSetupLinks",
  tags: ["admin"],
  summary: "The tenant's SSO set-up links, newest first, in every state (never a token).",
  request: { params: tenantIdParam, query: z.object(pageQuery) },
  responses: {
    200: json("A page of set-up links.", page(setupLink).openapi("SsoSetupLinkList")),
    404: problem("No such tenant."),
  },
});
const revoke = apiRoute("platform", {
  method: "delete",
  path: "/api/admin/tenants/{tenantId}/sso/setup-links/{linkId}",
  operationId: "adminRevokeSsoSetupLink",
  tags: ["admin"],
  summary: "Revoke a set-up link: opening it answers 404 from now on.",
  request: { params: tenantIdParam.extend(linkIdParam.shape) },
  responses: {
    204: { description: "Revoked." },
    404: problem("No such link of this tenant, or it is revoked already."),
  },
});

/** SSO set-up links: platform admins make them for a tenant's owners (docs/sso.md). */
export function ssoSetupLinkRoutes(deps: Deps) {
  return createRouter()
    .openapi(create, async (c) => {
      const { tenantId } = c.req.valid("param");
      const body = c.req.header("content-type") ? c.req.valid("json") : {};
      const link = await createSsoSetupLink(deps, adminCtxOf(c, tenantId), {
        expiresInHours: body?.expiresInHours,
      });
      return c.json(link, 201, {
        location: `/api/admin/tenants/${tenantId}/sso/setup-links/${link.id}`,
      });
    })
    .openapi(list, async (c) => {
      const { tenantId } = c.req.valid("param");
      return c.json(await listSsoSetupLinks(deps, adminCtxOf(c, tenantId), c.req.valid("query")), 200);
    })
    .openapi(revoke, async (c) => {
      const { tenantId, linkId } = c.req.valid("param");
      await revokeSsoSetupLink(deps, adminCtxOf(c, tenantId), { linkId });
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const ssoSetupLinksArea = defineArea({
  name: "sso-setup-links",
  routes: [ssoSetupLinkRoutes],
  auditActions: SSO_SETUP_LINKS_ACTIONS,
});
