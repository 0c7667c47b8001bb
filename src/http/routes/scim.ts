import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Deps } from "../../deps.ts";
import {
  listResponse as listResponseOf,
  resourceTypes,
  schemas,
  serviceProviderConfig,
} from "../../scim/scim-discovery.ts";
import { project } from "../../scim/scim-projection.ts";
import {
  createScimUser,
  deleteScimUser,
  getScimUser,
  listScimUsers,
  patchScimUser,
  replaceScimUser,
} from "../../scim/scim-users.ts";
import { defineArea } from "../area.ts";
import { createRouter } from "../request-context.ts";
import {
  baseOf,
  ctxOf,
  idParam,
  listQuery,
  listResponse,
  projection,
  SCIM_BASE,
  scimAuthenticate,
  scimBody,
  scimError,
  scimJson,
  scimJsonResponse,
  scimRoute,
  USER_URNS,
} from "../scim-protocol.ts";
import { SCIM_ACTIONS } from "./scim-actions.ts";

const routes = {
  spc: scimRoute(
    "get",
    "/ServiceProviderConfig",
    "getScimServiceProviderConfig",
    "What this SCIM service provider supports.",
    {},
    { 200: scimJson("The configuration.") },
  ),
  resourceTypes: scimRoute(
    "get",
    "/ResourceTypes",
    "listScimResourceTypes",
    "The SCIM resource types (User, Group).",
    {},
    { 200: scimJson("The resource types.", listResponse) },
  ),
  schemas: scimRoute(
    "get",
    "/Schemas",
    "listScimSchemas",
    "The SCIM schemas of the resource types.",
    {},
    { 200: scimJson("The schemas.", listResponse) },
  ),
  listUsers: scimRoute(
    "get",
    "/Users",
    "listScimUsers",
    "The tenant's members as SCIM Users, filtered and paged.",
    { query: listQuery },
    { 200: scimJson("A page of Users.", listResponse) },
  ),
  createUser: scimRoute(
    "post",
    "/Users",
    "createScimUser",
    "Provision a member (userName: the e-mail address).",
    { body: scimBody },
    {
      201: scimJson("The User created."),
      403: scimError("No seat is free: the plan's `seats` limit is reached, or the plan has no seats."),
      409: scimError("`uniqueness`: a member has this userName."),
    },
  ),
  getUser: scimRoute(
    "get",
    "/Users/{id}",
    "getScimUser",
    "A member as a SCIM User.",
    { params: idParam, query: z.object(projection) },
    { 200: scimJson("The User."), 404: scimError("No such User in this tenant.") },
  ),
  replaceUser: scimRoute(
    "put",
    "/Users/{id}",
    "replaceScimUser",
    "Replace a member's attributes; `active: false` ends the member's sessions.",
    { params: idParam, body: scimBody },
    {
      200: scimJson("The User."),
      404: scimError("No such User in this tenant."),
      409: scimError("`uniqueness`, or the tenant's last owner."),
    },
  ),
  patchUser: scimRoute(
    "patch",
    "/Users/{id}",
    "patchScimUser",
    "Patch a member (add, replace, remove; the forms Okta and Entra ID send).",
    { params: idParam, body: scimBody },
    {
      200: scimJson("The User."),
      404: scimError("No such User in this tenant."),
      409: scimError("`uniqueness`, or the tenant's last owner."),
    },
  ),
  deleteUser: scimRoute(
    "delete",
    "/Users/{id}",
    "deleteScimUser",
    "Remove a member from the tenant; its sessions end at once.",
    { params: idParam },
    {
      204: { description: "Removed." },
      404: scimError("No such User in this tenant."),
      409: scimError("The tenant's last owner."),
    },
  ),
};

/** A ListResponse of every resource at once (the discovery lists: resource types, schemas). */
const wholeList = <T>(all: T[]) => listResponseOf(all, all.length, 1);

/** The SCIM 2.0 service provider of every tenant (docs/scim.md), its tenant the token's. */
export function scimRoutes(deps: Deps) {
  const router = createRouter();
  router.use(`${SCIM_BASE}/*`, scimAuthenticate(deps));
  const body = async (c: Context) => (await c.req.json()) as unknown;
  return router
    .openapi(routes.spc, (c) => scimJsonResponse(c, serviceProviderConfig(baseOf(deps, c))))
    .openapi(routes.resourceTypes, (c) => scimJsonResponse(c, wholeList(resourceTypes(baseOf(deps, c)))))
    .openapi(routes.schemas, (c) => scimJsonResponse(c, wholeList(schemas(baseOf(deps, c)))))
    .openapi(routes.listUsers, async (c) => {
      const query = c.req.valid("query" as never) as z.infer<typeof listQuery>;
      const page = await listScimUsers(deps, ctxOf(c), { ...query, base: baseOf(deps, c) });
      return scimJsonResponse(c, {
        ...page,
        Resources: page.Resources.map((r) => project(r, query, USER_URNS)),
      });
    })
    .openapi(routes.createUser, async (c) => {
      const user = await createScimUser(deps, ctxOf(c), { body: await body(c), base: baseOf(deps, c) });
      return scimJsonResponse(c, user, 201, {
        location: String((user.meta as { location: string }).location),
      });
    })
    .openapi(routes.getUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      const query = c.req.valid("query" as never) as z.infer<typeof listQuery>;
      return scimJsonResponse(
        c,
        project(await getScimUser(deps, ctxOf(c), { id, base: baseOf(deps, c) }), query, USER_URNS),
      );
    })
    .openapi(routes.replaceUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      return scimJsonResponse(
        c,
        await replaceScimUser(deps, ctxOf(c), { id, body: await body(c), base: baseOf(deps, c) }),
      );
    })
    .openapi(routes.patchUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      return scimJsonResponse(
        c,
        await patchScimUser(deps, ctxOf(c), { id, body: await body(c), base: baseOf(deps, c) }),
      );
    })
    .openapi(routes.deleteUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      await deleteScimUser(deps, ctxOf(c), { id });
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const scimArea = defineArea({ name: "scim", routes: [scimRoutes], auditActions: SCIM_ACTIONS });
