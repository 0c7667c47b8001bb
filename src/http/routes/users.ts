import { createRoute, z } from "@hono/zod-openapi";
import { endSessions } from "../../auth/sessions.ts";
import { tenantRoles } from "../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import {
  createTenantUser,
  disableTenantUser,
  listTenantUsers,
  newUserSchema,
  removeTenantUser,
  userCursor,
} from "../../identity/users.ts";
import { createRouter, principalOf } from "../context.ts";
import { problem } from "../openapi.ts";

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
const uuidParam = (name: string) => z.object({ [name]: z.uuid() });
const body = { content: { "application/json": { schema: newUser } }, required: true };

const adminCreate = createRoute({
  method: "post",
  path: "/api/admin/tenants/{tenantId}/users",
  tags: ["admin"],
  summary: "Create a user in a tenant (a platform administrator creates the first owner).",
  security: [{ bearer: [] }],
  request: { params: z.object({ tenantId: z.uuid() }), body },
  responses: {
    201: { description: "Created.", content: { "application/json": { schema: created } } },
    404: problem("No such tenant."),
    409: problem("E-mail or phone already used in this tenant."),
  },
});

export function adminUserRoutes(_deps: Deps) {
  return createRouter().openapi(adminCreate, async (c) => {
    const { tenantId } = c.req.valid("param");
    const result = await createTenantUser(_deps.database.db, tenantId, c.req.valid("json"));
    return c.json(result, 201);
  });
}

const list = createRoute({
  method: "get",
  path: "/api/tenant/users",
  tags: ["tenant"],
  summary: "The caller's tenant's users in creation order, a page at a time (owners only).",
  security: [{ bearer: [] }],
  request: {
    query: z.object({
      limit: z.coerce.number().int().min(1).max(200).default(50),
      cursor: z.string().max(200).optional(),
    }),
  },
  responses: {
    200: {
      description: "A page of users; pass `nextCursor` as `cursor` for the next one (null on the last page).",
      content: {
        "application/json": {
          schema: z.object({ items: z.array(tenantUser), nextCursor: z.string().nullable() }),
        },
      },
    },
    400: problem("The limit or the cursor is not valid."),
  },
});
const add = createRoute({
  method: "post",
  path: "/api/tenant/users",
  tags: ["tenant"],
  summary: "Add a user to the caller's tenant.",
  security: [{ bearer: [] }],
  request: { body },
  responses: {
    201: { description: "Created.", content: { "application/json": { schema: created } } },
    409: problem("E-mail or phone already used."),
  },
});
const disable = createRoute({
  method: "post",
  path: "/api/tenant/users/{userId}/disable",
  tags: ["tenant"],
  summary: "Disable a user; their sessions end at once.",
  security: [{ bearer: [] }],
  request: { params: uuidParam("userId") },
  responses: { 204: { description: "Disabled." }, 404: problem("No such user in this tenant.") },
});
const remove = createRoute({
  method: "delete",
  path: "/api/tenant/users/{userId}",
  tags: ["tenant"],
  summary: "Remove a user.",
  security: [{ bearer: [] }],
  request: { params: uuidParam("userId") },
  responses: { 204: { description: "Removed." }, 404: problem("No such user in this tenant.") },
});

/** Tenant owners manage their own tenant's users; every query is scoped by the caller's tenant. */
export function tenantUserRoutes(deps: Deps) {
  const tenantOf = (c: Parameters<typeof principalOf>[0]) => {
    const tenantId = principalOf(c).tenantId;
    if (!tenantId) throw new AppError("forbidden", "Tenant users only.");
    return tenantId;
  };
  return createRouter()
    .openapi(list, async (c) => {
      const { limit, cursor } = c.req.valid("query");
      const after = cursor === undefined ? undefined : userCursor.decode(cursor);
      if (after === null)
        throw new AppError("validation_failed", "The request is not valid.", {
          fields: [{ path: "cursor", message: "not a cursor returned by this endpoint" }],
        });
      const page = await listTenantUsers(deps.database.db, tenantOf(c), { limit, after });
      return c.json({ items: page.items, nextCursor: page.next && userCursor.encode(page.next) }, 200);
    })
    .openapi(add, async (c) =>
      c.json(await createTenantUser(deps.database.db, tenantOf(c), c.req.valid("json")), 201),
    )
    .openapi(disable, async (c) => {
      const { userId } = c.req.valid("param") as { userId: string };
      await disableTenantUser(deps.database.db, tenantOf(c), userId, deps.clock.now());
      await endSessions(deps, { userId });
      return c.body(null, 204);
    })
    .openapi(remove, async (c) => {
      const { userId } = c.req.valid("param") as { userId: string };
      await removeTenantUser(deps.database.db, tenantOf(c), userId);
      await endSessions(deps, { userId });
      return c.body(null, 204);
    });
}
