import { z } from "@hono/zod-openapi";
import {
  createApiKey,
  DEFAULT_GRACE_SECONDS,
  listApiKeys,
  MAX_GRACE_SECONDS,
  revokeApiKey,
  rollApiKey,
} from "../../api-keys/keys.ts";
import { apiKeyScopes } from "../../api-keys/scopes.ts";
import type { Deps } from "../../deps.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem } from "../openapi.ts";
import { createRouter, tenantCtxOf } from "../request-context.ts";
import { API_KEYS_ACTIONS } from "./api-keys-actions.ts";

const scope = z.enum(apiKeyScopes).openapi("ApiKeyScope", {
  description: "What a key may call (docs/api-keys.md): `area:read`, `area:write`, or `area:*` for both.",
});
const newApiKey = z
  .object({
    name: z.string().trim().min(1).max(100).openapi({ description: "What the key is for." }),
    scopes: z
      .array(scope)
      .min(1)
      .max(apiKeyScopes.length)
      .refine((scopes) => new Set(scopes).size === scopes.length, "a scope is listed twice")
      .openapi({ uniqueItems: true }),
    expiresAt: z.iso
      .datetime({ offset: true })
      .optional()
      .openapi({ description: "When the key stops working (in the future); none: never." }),
  })
  .openapi("NewApiKey");
const apiKeyFields = {
  id: z.uuid(),
  name: z.string(),
  scopes: z.array(z.string()),
  prefix: z
    .string()
    .openapi({ description: "`plk_` and the key's id part: recognises the key, cannot use it." }),
  createdBy: z.uuid().nullable().openapi({ description: "The user who created it; null once removed." }),
  createdAt: z.string(),
  lastUsedAt: z.string().nullable().openapi({ description: "Recorded at most once a minute." }),
  lastUsedIp: z.string().nullable().openapi({ description: "The client address of that use." }),
  expiresAt: z.string().nullable(),
  rolledAt: z.string().nullable(),
  previousKeyExpiresAt: z
    .string()
    .nullable()
    .openapi({ description: "Until when the secret the last roll replaced still works; null: it does not." }),
  revokedAt: z.string().nullable(),
  status: z.enum(["active", "expired", "revoked"]),
};
const apiKey = z.object(apiKeyFields).openapi("ApiKey");
const issuedApiKey = z
  .object({
    ...apiKeyFields,
    key: z.string().openapi({
      description: "The key (`plk_<id part>_<secret part>`), shown only in this answer: store it now.",
    }),
  })
  .openapi("IssuedApiKey");
const rollInput = z
  .object({
    gracePeriodSeconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_GRACE_SECONDS)
      .default(DEFAULT_GRACE_SECONDS)
      .openapi({
        description: `How long the replaced secret keeps working, in seconds (default ${DEFAULT_GRACE_SECONDS}: 24 h; 0: it stops now).`,
      }),
  })
  .openapi("RollApiKey");
const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });

const create = apiRoute(
  tenantAccess(["owner", "admin"], { apiKey: "none" }),
  {
    method: "post",
    path: "/api/tenant/api-keys",
    operationId: "createApiKey",
    tags: ["tenant"],
    summary: "Create an API key for the caller's tenant (owners and admins); the key is shown only here.",
    request: { body: jsonBody(newApiKey) },
    responses: {
      201: json("Created: the key, shown this once.", issuedApiKey),
      402: problem("`payment_required`: the tenant's plan has no API keys."),
      403: problem(
        "`usage_limit_reached`: the plan's `api_keys` limit is reached (revoke one); `forbidden`: not an owner or admin, or an API key.",
      ),
    },
  },
  { location: true },
);
const list = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "get",
  path: "/api/tenant/api-keys",
  operationId: "listApiKeys",
  tags: ["tenant"],
  summary: "The caller's tenant's API keys (revoked ones too) in creation order, a page at a time.",
  request: { query: z.object(pageQuery) },
  responses: {
    200: json("A page of keys (never a key itself).", page(apiKey).openapi("ApiKeyList")),
    400: problem("The limit or the cursor is not valid."),
  },
});
const revoke = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "delete",
  path: "/api/tenant/api-keys/{id}",
  operationId: "revokeApiKey",
  tags: ["tenant"],
  summary: "Revoke an API key: refused at once by every API process (revoking a revoked key is a no-op).",
  request: { params: idParam },
  responses: {
    204: { description: "Revoked." },
    404: problem("No such key in this tenant."),
  },
});
const roll = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "post",
  path: "/api/tenant/api-keys/{id}/roll",
  operationId: "rollApiKey",
  tags: ["tenant"],
  summary: "Give an API key a new secret; the old one keeps working for `gracePeriodSeconds`.",
  request: { params: idParam, body: jsonBody(rollInput) },
  responses: {
    200: json("Rolled: the new key, shown this once.", issuedApiKey),
    404: problem("No such key in this tenant."),
    409: problem("`conflict`: the key is revoked or expired."),
  },
});

/**
 * A tenant's API keys, for its owners and admins (never for a key: src/api-keys/scopes.ts). Mounted
 * behind `/api/tenant/*` and the owner/admin guard; every query is scoped by the caller's tenant.
 */
export function tenantApiKeyRoutes(deps: Deps) {
  return createRouter()
    .openapi(create, async (c) => {
      const key = await createApiKey(deps, tenantCtxOf(c), c.req.valid("json"));
      return c.json(key, 201, { location: `/api/tenant/api-keys/${key.id}` });
    })
    .openapi(list, async (c) => c.json(await listApiKeys(deps, tenantCtxOf(c), c.req.valid("query")), 200))
    .openapi(revoke, async (c) => {
      await revokeApiKey(deps, tenantCtxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    })
    .openapi(roll, async (c) =>
      c.json(
        await rollApiKey(deps, tenantCtxOf(c), {
          id: c.req.valid("param").id,
          gracePeriodSeconds: c.req.valid("json").gracePeriodSeconds,
        }),
        200,
      ),
    );
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const apiKeysArea = defineArea({
  name: "api-keys",
  routes: [tenantApiKeyRoutes],
  auditActions: API_KEYS_ACTIONS,
});
