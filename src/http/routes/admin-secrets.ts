import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import {
  deleteTenantSecret,
  listTenantSecrets,
  putTenantSecret,
  type TenantSecretInfo,
} from "../../providers/tenant-secret-store.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem } from "../openapi.ts";
import { adminCtxOf, createRouter } from "../request-context.ts";
import { SECRETS_ACTIONS } from "./admin-secrets-actions.ts";

const params = z.object({
  tenantId: z.string().openapi({ param: { name: "tenantId", in: "path" } }),
  name: z.string().openapi({ param: { name: "name", in: "path" } }),
});

const secretInfo = z
  .object({ name: z.string(), keyId: z.string(), createdAt: z.string(), updatedAt: z.string() })
  .openapi("TenantSecretInfo");

const put = apiRoute("platform", {
  method: "put",
  path: "/api/admin/tenants/{tenantId}/secrets/{name}",
  operationId: "adminPutSecret",
  tags: ["admin"],
  summary: "Store or replace a tenant secret. Write-only: no endpoint returns a value.",
  request: {
    params,
    body: jsonBody(z.object({ value: z.string().min(1) }).openapi("SecretValue")),
  },
  responses: {
    204: { description: "Stored, encrypted under the current key." },
    400: problem("The name or value is not valid."),
    404: problem("No such tenant."),
    503: problem("Tenant secrets are not configured."),
  },
});

const list = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/secrets",
  operationId: "adminListSecrets",
  tags: ["admin"],
  summary: "List the tenant's secrets: names, key ids and timestamps, never values.",
  request: { params: params.pick({ tenantId: true }), query: z.object(pageQuery) },
  responses: {
    200: json("The secrets by name, without values.", page(secretInfo).openapi("TenantSecretList")),
    404: problem("No such tenant."),
  },
});

const remove = apiRoute("platform", {
  method: "delete",
  path: "/api/admin/tenants/{tenantId}/secrets/{name}",
  operationId: "adminDeleteSecret",
  tags: ["admin"],
  summary: "Delete a tenant secret.",
  request: { params },
  responses: {
    204: { description: "Deleted." },
    404: problem("No such tenant or secret."),
  },
});

const view = (row: TenantSecretInfo) => ({
  name: row.name,
  keyId: row.keyId,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
});

/** Platform admin: tenant secrets, write-only over HTTP. */
export function adminSecretRoutes(deps: Deps) {
  if (!deps.tenantSecretKeyring)
    deps.logger.warn(
      "tenant secrets cannot be stored: Security:TenantSecrets:KeyId and MasterKey are not usable",
    );
  return createRouter()
    .openapi(put, async (c) => {
      const { tenantId, name } = c.req.valid("param");
      await putTenantSecret(deps, adminCtxOf(c, tenantId), {
        name,
        value: c.req.valid("json").value,
      });
      return c.body(null, 204);
    })
    .openapi(list, async (c) => {
      const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
      const found = await listTenantSecrets(deps, ctx, c.req.valid("query"));
      return c.json({ items: found.items.map(view), nextCursor: found.nextCursor }, 200);
    })
    .openapi(remove, async (c) => {
      const { tenantId, name } = c.req.valid("param");
      await deleteTenantSecret(deps, adminCtxOf(c, tenantId), { name });
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const secretsArea = defineArea({
  name: "admin-secrets",
  routes: [adminSecretRoutes],
  auditActions: SECRETS_ACTIONS,
});
