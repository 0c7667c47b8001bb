import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import {
  listTenantProviders,
  providerStatuses,
  providerTypes,
  putTenantProvider,
  type TenantProvider,
  updateTenantProviderStatus,
} from "../../providers/tenant-providers.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem } from "../openapi.ts";
import { adminCtxOf, createRouter } from "../request-context.ts";
import { PROVIDERS_ACTIONS } from "./admin-providers-actions.ts";

const providerSchema = z
  .object({
    type: z.enum(providerTypes),
    provider: z.string(),
    status: z.enum(providerStatuses),
    settings: z.record(z.string(), z.unknown()),
    secretRefs: z.record(z.string(), z.string()),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("TenantExternalProvider");

const params = z.object({
  tenantId: z.string().openapi({ param: { name: "tenantId", in: "path" } }),
  type: z.enum(providerTypes).openapi({ param: { name: "type", in: "path" } }),
});

const put = apiRoute("platform", {
  method: "put",
  path: "/api/admin/tenants/{tenantId}/providers/{type}",
  operationId: "adminPutProvider",
  tags: ["admin"],
  summary:
    "Create or replace the tenant's provider of one type. Secret values go to tenant secrets, named in secretRefs.",
  request: {
    params,
    body: jsonBody(
      z
        .object({
          provider: z.string().trim().min(1).max(100),
          status: z.enum(providerStatuses).default("Active"),
          settings: z.record(z.string(), z.unknown()).default({}),
          secretRefs: z.record(z.string(), z.string()).default({}),
        })
        .openapi("ProviderRequest"),
    ),
  },
  responses: {
    200: json("The provider.", providerSchema),
    400: problem("Not valid (for example a setting that looks like a secret)."),
    404: problem("No such tenant."),
  },
});

const list = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/providers",
  operationId: "adminListProviders",
  tags: ["admin"],
  summary: "List the tenant's providers.",
  request: { params: params.pick({ tenantId: true }), query: z.object(pageQuery) },
  responses: {
    200: json(
      "The providers by type (one per type at most), a page at a time.",
      page(providerSchema).openapi("ProviderList"),
    ),
    404: problem("No such tenant."),
  },
});

const disable = apiRoute("platform", {
  method: "post",
  path: "/api/admin/tenants/{tenantId}/providers/{type}/disable",
  operationId: "adminDisableProvider",
  tags: ["admin"],
  summary:
    "Disable the tenant's provider: the tenant then has none of that type (no fallback to the global default).",
  request: { params },
  responses: {
    200: json("The disabled provider.", providerSchema),
    404: problem("No such tenant, or no provider of this type."),
  },
});

function view(row: TenantProvider) {
  return {
    type: row.type,
    provider: row.provider,
    status: row.status,
    settings: row.settings,
    secretRefs: row.secretRefs,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** Platform admin: tenant external providers. */
export function adminProviderRoutes(deps: Deps) {
  return createRouter()
    .openapi(put, async (c) => {
      const { tenantId, type } = c.req.valid("param");
      const row = await putTenantProvider(deps, adminCtxOf(c, tenantId), {
        ...c.req.valid("json"),
        type,
      });
      return c.json(view(row), 200);
    })
    .openapi(list, async (c) => {
      const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
      const found = await listTenantProviders(deps, ctx, c.req.valid("query"));
      return c.json({ items: found.items.map(view), nextCursor: found.nextCursor }, 200);
    })
    .openapi(disable, async (c) => {
      const { tenantId, type } = c.req.valid("param");
      const row = await updateTenantProviderStatus(deps, adminCtxOf(c, tenantId), {
        type,
        status: "Disabled",
      });
      return c.json(view(row), 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const providersArea = defineArea({
  name: "admin-providers",
  routes: [adminProviderRoutes],
  auditActions: PROVIDERS_ACTIONS,
});
