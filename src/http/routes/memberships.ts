import { z } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import type { AuthDeps } from "../../auth/deps.ts";
import { switchTenant } from "../../identity/memberships.ts";
import { defineArea } from "../area.ts";
import { accessOf, apiRoute, json, jsonBody, problem, routerPath } from "../openapi.ts";
import { type AppEnv, createRouter, ctxOf } from "../request-context.ts";
import { tokenPair } from "./auth.ts";

const routes = {
  switchTenant: apiRoute("signedIn", {
    method: "post",
    path: "/api/auth/switch",
    operationId: "switchTenant",
    tags: ["auth"],
    summary: "A token pair for another tenant the caller is a member of, without a password.",
    description:
      "Opens a token session in the tenant named by code or id (listed in /api/auth/me `memberships`), " +
      "ending when the current session would; the current session stays open. A tenant the caller is " +
      "not an Active member of, whether it exists or not, is 404. Bearer tokens only.",
    request: {
      body: jsonBody(
        z
          .object({
            tenant: z.string().min(1).max(64).openapi({ description: "Tenant code or id." }),
          })
          .openapi("TenantSwitch"),
      ),
    },
    responses: {
      200: json("Signed in to the tenant.", tokenPair),
      403: problem("A browser session (cookie): browsers sign in on the tenant."),
      404: problem("Not a member of such a tenant."),
    },
  }),
};

/** The caller's memberships: switching tenant (`/api/auth/me` lists them). */
export function membershipRoutes(deps: AuthDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const router = createRouter();
  for (const route of Object.values(routes))
    if (accessOf(route) === "signedIn") router.use(routerPath(route), authenticated);
  return router.openapi(routes.switchTenant, async (c) => {
    const within = c.get("tenant")?.id ?? null;
    const pair = await switchTenant(deps, ctxOf(c), { tenant: c.req.valid("json").tenant, within });
    c.header("cache-control", "no-store");
    return c.json(pair, 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const membershipsArea = defineArea({ name: "memberships", routes: [membershipRoutes] });
