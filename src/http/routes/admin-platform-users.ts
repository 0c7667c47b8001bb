import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { createPlatformUser, newPlatformUserSchema } from "../../identity/platform-users.ts";
import { platformRoleNames } from "../../identity/roles.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, problem } from "../openapi.ts";
import { createRouter, ctxOf } from "../request-context.ts";
import { PLATFORM_USERS_ACTIONS } from "./admin-platform-users-actions.ts";

const create = apiRoute("platform", {
  method: "post",
  path: "/api/admin/platform-users",
  operationId: "adminCreatePlatformUser",
  tags: ["admin"],
  summary:
    "Add platform staff with one platform role (`platform_admin`, or the read-only `platform_viewer`); " +
    "the password must be changed at first sign-in.",
  request: {
    body: jsonBody(
      z
        .object({
          email: z.email().max(320),
          name: z.string().trim().min(1).max(200),
          password: newPlatformUserSchema.shape.password,
          role: z.enum(platformRoleNames),
        })
        .openapi("NewPlatformUser"),
    ),
  },
  responses: {
    201: json("Created.", z.object({ id: z.uuid() }).openapi("CreatedPlatformUser")),
    409: problem("A platform user with this e-mail exists."),
  },
});

/** Platform admin: platform staff and their roles. Each declares `platform` access. */
export function adminPlatformUserRoutes(deps: Deps) {
  return createRouter().openapi(create, async (c) =>
    c.json(await createPlatformUser(deps, ctxOf(c, null), c.req.valid("json")), 201),
  );
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const platformUsersArea = defineArea({
  name: "admin-platform-users",
  routes: [adminPlatformUserRoutes],
  auditActions: PLATFORM_USERS_ACTIONS,
});
