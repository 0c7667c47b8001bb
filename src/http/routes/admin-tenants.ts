import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { createTenant, getTenant, listTenants, suspendTenant } from "../../tenancy/tenants.ts";
import { defineArea } from "../area.ts";
import { STAFF_ROLES } from "../console/layout.ts";
import { tenantPages } from "../console/pages-tenants.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem, tenantIdParam } from "../openapi.ts";
import { createRouter, ctxOf } from "../request-context.ts";
import { TENANTS_ACTIONS } from "./admin-tenants-actions.ts";

const tenantSchema = z
  .object({
    id: z.uuid(),
    code: z.string(),
    name: z.string(),
    status: z.enum(["Active", "Suspended"]),
  })
  .openapi("Tenant");
const create = apiRoute(
  "platform",
  {
    method: "post",
    path: "/api/admin/tenants",
    operationId: "adminCreateTenant",
    tags: ["admin"],
    summary: "Create a tenant.",
    request: {
      body: jsonBody(
        z
          .object({ code: z.string().min(1).max(63), name: z.string().trim().min(1).max(200) })
          .openapi("NewTenant"),
      ),
    },
    responses: {
      201: json("Created.", tenantSchema),
      400: problem("The code or name is not valid."),
      409: problem("The code is taken."),
    },
  },
  { location: true },
);

const list = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants",
  operationId: "adminListTenants",
  tags: ["admin"],
  summary: "List tenants by code, a page at a time (pass `nextCursor` as `cursor`).",
  request: {
    query: z.object(pageQuery),
  },
  responses: {
    200: json("A page of tenants.", page(tenantSchema).openapi("TenantList")),
  },
});

const show = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}",
  operationId: "adminGetTenant",
  tags: ["admin"],
  summary: "Show a tenant.",
  request: { params: tenantIdParam },
  responses: {
    200: json("The tenant.", tenantSchema),
    404: problem("No such tenant."),
  },
});

const suspend = apiRoute("platform", {
  method: "post",
  path: "/api/admin/tenants/{tenantId}/suspend",
  operationId: "adminSuspendTenant",
  tags: ["admin"],
  summary: "Suspend a tenant.",
  request: { params: tenantIdParam },
  responses: {
    200: json("The suspended tenant.", tenantSchema),
    404: problem("No such tenant."),
  },
});

/** Platform admin: tenants. Each declares `platform` access. */
export function adminTenantRoutes(deps: Deps) {
  return createRouter()
    .openapi(create, async (c) => {
      const tenant = await createTenant(deps, ctxOf(c), c.req.valid("json"));
      return c.json(tenant, 201, { location: `/api/admin/tenants/${tenant.id}` });
    })
    .openapi(list, async (c) => c.json(await listTenants(deps, ctxOf(c), c.req.valid("query")), 200))
    .openapi(show, async (c) => c.json(await getTenant(deps, ctxOf(c), c.req.valid("param")), 200))
    .openapi(suspend, async (c) => c.json(await suspendTenant(deps, ctxOf(c), c.req.valid("param")), 200));
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const tenantsArea = defineArea({
  name: "admin-tenants",
  routes: [adminTenantRoutes],
  auditActions: TENANTS_ACTIONS,
  consolePages: [{ path: "/console/tenants", title: "Tenants", seenBy: STAFF_ROLES, routes: tenantPages }],
});
