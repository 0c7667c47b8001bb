import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { createTenant, getTenant, listTenants, suspendTenant, tenantCursor } from "../../tenancy/tenants.ts";
import { createRouter, ctxOf } from "../context.ts";
import { apiRoute, json, jsonBody, page, problem, tenantIdParam } from "../openapi.ts";

const tenantSchema = z
  .object({
    id: z.uuid(),
    code: z.string(),
    name: z.string(),
    status: z.enum(["Active", "Suspended"]),
  })
  .openapi("Tenant");
const create = apiRoute("platform", {
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
});

const list = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants",
  operationId: "adminListTenants",
  tags: ["admin"],
  summary: "List tenants by code, a page at a time (pass `nextCursor` as `cursor`).",
  request: {
    query: z.object({
      limit: z.coerce.number().int().min(1).max(200).default(50),
      cursor: z.string().max(200).optional(),
      offset: z.coerce
        .number()
        .int()
        .min(0)
        .optional()
        .openapi({ deprecated: true, description: "Older paging, still accepted; ignored with `cursor`." }),
    }),
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
  const db = deps.database.db;
  return createRouter()
    .openapi(create, async (c) => c.json(await createTenant(db, c.req.valid("json"), ctxOf(c)), 201))
    .openapi(list, async (c) => {
      const { limit, offset, cursor } = c.req.valid("query");
      const after = cursor === undefined ? undefined : tenantCursor.decode(cursor);
      if (after === null)
        throw new AppError("validation_failed", "The request is not valid.", {
          fields: [{ path: "cursor", message: "not a cursor returned by this endpoint" }],
        });
      const found = await listTenants(db, { limit, offset, after });
      return c.json({ items: found.items, nextCursor: found.next && tenantCursor.encode(found.next) }, 200);
    })
    .openapi(show, async (c) => c.json(await getTenant(db, c.req.valid("param").tenantId), 200))
    .openapi(suspend, async (c) => c.json(await suspendTenant(deps, ctxOf(c), c.req.valid("param")), 200));
}
