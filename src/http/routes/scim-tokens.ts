import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { createScimToken, deleteScimToken, listScimTokens } from "../../scim/scim-tokens.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem } from "../openapi.ts";
import { createRouter, tenantCtxOf } from "../request-context.ts";
import { SCIM_TOKENS_ACTIONS } from "./scim-tokens-actions.ts";

const newScimToken = z
  .object({
    name: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .optional()
      .openapi({ description: "What the token is for (default `SCIM`)." }),
  })
  .openapi("NewScimToken");
const tokenFields = {
  id: z.uuid(),
  name: z.string(),
  prefix: z
    .string()
    .openapi({ description: "`plscim_` and the token's id part: recognises it, cannot use it." }),
  createdBy: z.uuid().nullable(),
  createdAt: z.string(),
  lastUsedAt: z.string().nullable().openapi({ description: "Recorded at most once a minute." }),
};
const scimToken = z.object(tokenFields).openapi("ScimToken");
const issuedScimToken = z
  .object({
    ...tokenFields,
    token: z.string().openapi({
      description:
        "The bearer token for the directory's SCIM client (base URL `/scim/v2`), shown only in this answer.",
    }),
  })
  .openapi("IssuedScimToken");
const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });
const owners = tenantAccess(["owner"], { apiKey: "none" });

const create = apiRoute(
  owners,
  {
    method: "post",
    path: "/api/tenant/scim/tokens",
    operationId: "createScimToken",
    tags: ["tenant"],
    summary: "Create a SCIM token for the tenant's directory (owners); the token is shown only here.",
    request: { body: jsonBody(newScimToken) },
    responses: {
      201: json("Created: the token, shown this once.", issuedScimToken),
      402: problem("`payment_required`: the tenant's plan has no `sso` (enterprise sign-in)."),
    },
  },
  { location: true },
);
const list = apiRoute(owners, {
  method: "get",
  path: "/api/tenant/scim/tokens",
  operationId: "listScimTokens",
  tags: ["tenant"],
  summary: "The tenant's SCIM tokens not deleted, in creation order (never a token itself).",
  request: { query: z.object(pageQuery) },
  responses: {
    200: json("A page of tokens.", page(scimToken).openapi("ScimTokenList")),
  },
});
const remove = apiRoute(owners, {
  method: "delete",
  path: "/api/tenant/scim/tokens/{id}",
  operationId: "deleteScimToken",
  tags: ["tenant"],
  summary: "Delete (revoke) a SCIM token: refused from the next request on, on every API process.",
  request: { params: idParam },
  responses: {
    204: { description: "Deleted." },
    404: problem("No such token in this tenant."),
  },
});

/** The tenant's SCIM tokens, for its owners (docs/scim.md). */
export function scimTokenRoutes(deps: Deps) {
  return createRouter()
    .openapi(create, async (c) => {
      const token = await createScimToken(deps, tenantCtxOf(c), c.req.valid("json"));
      return c.json(token, 201, { location: `/api/tenant/scim/tokens/${token.id}` });
    })
    .openapi(list, async (c) => c.json(await listScimTokens(deps, tenantCtxOf(c), c.req.valid("query")), 200))
    .openapi(remove, async (c) => {
      await deleteScimToken(deps, tenantCtxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const scimTokensArea = defineArea({
  name: "scim-tokens",
  routes: [scimTokenRoutes],
  auditActions: SCIM_TOKENS_ACTIONS,
});
