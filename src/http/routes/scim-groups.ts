import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { GROUP_SCHEMA } from "../../scim/scim-discovery.ts";
import {
  createScimGroup,
  deleteScimGroup,
  getScimGroup,
  listScimGroups,
  patchScimGroup,
  replaceScimGroup,
} from "../../scim/scim-groups.ts";
import { project } from "../../scim/scim-projection.ts";
import { defineArea } from "../area.ts";
import { createRouter } from "../request-context.ts";
import {
  baseOf,
  ctxOf,
  idParam,
  listQuery,
  listResponse,
  projection,
  scimBody,
  scimError,
  scimJson,
  scimJsonResponse,
  scimRoute,
} from "../scim-protocol.ts";
import { SCIM_GROUPS_ACTIONS } from "./scim-groups-actions.ts";

const URNS = [GROUP_SCHEMA];
const notFound = scimError("No such Group in this tenant.");
const conflict = scimError(
  "`uniqueness`: a group has this displayName; or the tenant's last owner would lose the role.",
);

const routes = {
  list: scimRoute(
    "get",
    "/Groups",
    "listScimGroups",
    "The tenant's groups, filtered (`displayName`, `externalId`, `members.value`) and paged.",
    { query: listQuery },
    { 200: scimJson("A page of Groups.", listResponse) },
  ),
  create: scimRoute(
    "post",
    "/Groups",
    "createScimGroup",
    "Create a group; a group named after a role (`Admins`, `Owners`…) gives it to its members.",
    { body: scimBody },
    { 201: scimJson("The Group created."), 409: conflict },
  ),
  get: scimRoute(
    "get",
    "/Groups/{id}",
    "getScimGroup",
    "A group and its members.",
    { params: idParam, query: z.object(projection) },
    { 200: scimJson("The Group."), 404: notFound },
  ),
  replace: scimRoute(
    "put",
    "/Groups/{id}",
    "replaceScimGroup",
    "Replace a group's name and members (the roles they give follow).",
    { params: idParam, body: scimBody },
    { 200: scimJson("The Group."), 404: notFound, 409: conflict },
  ),
  patch: scimRoute(
    "patch",
    "/Groups/{id}",
    "patchScimGroup",
    "Patch a group (members added or removed as Okta and Entra ID send them).",
    { params: idParam, body: scimBody },
    { 200: scimJson("The Group."), 404: notFound, 409: conflict },
  ),
  delete: scimRoute(
    "delete",
    "/Groups/{id}",
    "deleteScimGroup",
    "Delete a group (its members lose the role it gave).",
    { params: idParam },
    { 204: { description: "Deleted." }, 404: notFound, 409: conflict },
  ),
};

/** SCIM Groups (docs/scim.md); mounted after `scimRoutes`, whose token check covers /scim/v2/*. */
export function scimGroupRoutes(deps: Deps) {
  const param = (c: { req: { valid: (target: never) => unknown } }) =>
    (c.req.valid("param" as never) as { id: string }).id;
  const query = (c: { req: { valid: (target: never) => unknown } }) =>
    c.req.valid("query" as never) as z.infer<typeof listQuery>;
  return createRouter()
    .openapi(routes.list, async (c) => {
      const q = query(c);
      const page = await listScimGroups(deps, ctxOf(c), { ...q, base: baseOf(deps, c) });
      return scimJsonResponse(c, { ...page, Resources: page.Resources.map((r) => project(r, q, URNS)) });
    })
    .openapi(routes.create, async (c) => {
      const group = await createScimGroup(deps, ctxOf(c), {
        body: await c.req.json(),
        base: baseOf(deps, c),
      });
      return scimJsonResponse(c, group, 201, { location: group.meta.location });
    })
    .openapi(routes.get, async (c) =>
      scimJsonResponse(
        c,
        project(await getScimGroup(deps, ctxOf(c), { id: param(c), base: baseOf(deps, c) }), query(c), URNS),
      ),
    )
    .openapi(routes.replace, async (c) =>
      scimJsonResponse(
        c,
        await replaceScimGroup(deps, ctxOf(c), {
          id: param(c),
          body: await c.req.json(),
          base: baseOf(deps, c),
        }),
      ),
    )
    .openapi(routes.patch, async (c) =>
      scimJsonResponse(
        c,
        await patchScimGroup(deps, ctxOf(c), {
          id: param(c),
          body: await c.req.json(),
          base: baseOf(deps, c),
        }),
      ),
    )
    .openapi(routes.delete, async (c) => {
      await deleteScimGroup(deps, ctxOf(c), { id: param(c) });
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const scimGroupsArea = defineArea({
  name: "scim-groups",
  routes: [scimGroupRoutes],
  auditActions: SCIM_GROUPS_ACTIONS,
});
