import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { tenantRoles } from "../../identity/roles.ts";
import {
  createTenantUser,
  deleteTenantUser,
  disableTenantUser,
  listTenantUsers,
  newUserSchema,
} from "../../identity/users.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, pageQuery, problem } from "../openapi.ts";
import { adminCtxOf, createRouter, tenantCtxOf } from "../request-context.ts";
import { TENANT_USERS_ACTIONS } from "./users-actions.ts";

const newUser = z
  .object({
    email: z.email().max(320),
    name: z.string().trim().min(1).max(200),
    password: newUserSchema.shape.password,
    role: z.enum(tenantRoles).default("member"),
    // the same rule the service applies, so a bad number is a 400 naming the field
    phone: newUserSchema.shape.phone,
  })
  .openapi("NewUser");
const created = z.object({ id: z.uuid() }).openapi("Created");
const tenantUser = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string(),
    phone: z.string().nullable(),
    status: z.string(),
    role: z.string().nullable(),
    mustChangePassword: z.boolean(),
    createdAt: z.string(),
  })
  .openapi("TenantUser");
const userIdParam = z.object({ userId: z.uuid() });

const adminCreate = apiRoute("platform", {
  method: "post",
  path: "/api/admin/tenants/{tenantId}/users",
  operationId: "adminCreateTenantUser",
  tags: ["admin"],
  summary: "Create a user in a tenant (a platform administrator creates the first owner).",
  request: { params: z.object({ tenantId: z.uuid() }), body: jsonBody(newUser) },
  responses: {
    201: json("Created.", created),
    404: problem("No such tenant."),
    409: problem("E-mail or phone already used in this tenant."),
  },
});

/** Platform admin: a tenant's users. Each declares `platform` access. */
export function adminUserRoutes(deps: Deps) {
  return createRouter().openapi(adminCreate, async (c) => {
    const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
    return c.json(await createTenantUser(deps, ctx, c.req.valid("json")), 201);
  });
}

const list = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "users:read" }), {
  method: "get",
  path: "/api/tenant/users",
  operationId: "listTenantUsers",
  tags: ["tenant"],
  summary: "The caller's tenant's users in creation order, a page at a time (owners and admins).",
  request: {
    query: z.object(pageQuery),
  },
  responses: {
    200: json(
      "A page of users; pass `nextCursor` as `cursor` for the next one (null on the last page).",
      z.object({ items: z.array(tenantUser), nextCursor: z.string().nullable() }).openapi("TenantUserList"),
    ),
    400: problem("The limit or the cursor is not valid."),
  },
});
const add = apiRoute(
  tenantAccess(["owner", "admin"], { apiKey: "users:admin" }),
  {
    method: "post",
    path: "/api/tenant/users",
    operationId: "createTenantUser",
    tags: ["tenant"],
    summary: "Add a user to the caller's tenant.",
    request: { body: jsonBody(newUser) },
    responses: {
      201: json("Created.", created),
      402: problem("`payment_required`: the plan has no seats."),
      403: problem(
        "`forbidden`: only an owner adds an owner (docs/roles.md); an API key adds members only (docs/api-keys.md). `usage_limit_reached`: every seat (members and pending invitations) is taken.",
      ),
      409: problem("E-mail or phone already used."),
    },
  },
  { location: true },
);
const disable = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "users:write" }), {
  method: "post",
  path: "/api/tenant/users/{userId}/disable",
  operationId: "disableTenantUser",
  tags: ["tenant"],
  summary: "Disable a user; their sessions end at once.",
  request: { params: userIdParam },
  responses: {
    204: { description: "Disabled." },
    403: problem("`forbidden`: only an owner disables an owner."),
    404: problem("No such user in this tenant."),
    409: problem("The tenant's last owner cannot be disabled."),
  },
});
const remove = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "users:write" }), {
  method: "delete",
  path: "/api/tenant/users/{userId}",
  operationId: "removeTenantUser",
  tags: ["tenant"],
  summary: "Remove a user.",
  request: { params: userIdParam },
  responses: {
    204: { description: "Removed." },
    403: problem("`forbidden`: only an owner removes an owner."),
    404: problem("No such user in this tenant."),
    409: problem("The tenant's last owner cannot be removed."),
  },
});

/**
 * Tenant owners and admins manage their own tenant's users (admins not owners: docs/roles.md); every
 * query is scoped by the caller's tenant.
 */
export function tenantUserRoutes(deps: Deps) {
  return createRouter()
    .openapi(list, async (c) =>
      c.json(await listTenantUsers(deps, tenantCtxOf(c), c.req.valid("query")), 200),
    )
    .openapi(add, async (c) => {
      const user = await createTenantUser(deps, tenantCtxOf(c), c.req.valid("json"));
      return c.json(user, 201, { location: `/api/tenant/users/${user.id}` });
    })
    .openapi(disable, async (c) => {
      await disableTenantUser(deps, tenantCtxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    })
    .openapi(remove, async (c) => {
      await deleteTenantUser(deps, tenantCtxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const adminUsersArea = defineArea({ name: "admin-users", routes: [adminUserRoutes] });

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const tenantUsersArea = defineArea({
  name: "tenant-users",
  routes: [tenantUserRoutes],
  auditActions: TENANT_USERS_ACTIONS,
});
