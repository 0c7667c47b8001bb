import { z } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { confirmEmailChange, requestEmailChange } from "../../auth/email-change.ts";
import { defineArea } from "../area.ts";
import { accessOf, apiRoute, jsonBody, problem, routerPath } from "../openapi.ts";
import { type AppEnv, anonymousCtxOf, createRouter, ctxOf } from "../request-context.ts";
import type { AuthRouteDeps } from "./auth.ts";
import { EMAIL_CHANGE_ACTIONS } from "./auth-email-change-actions.ts";

const routes = {
  request: apiRoute(
    "signedIn",
    {
      method: "post",
      path: "/api/auth/email/change",
      operationId: "requestEmailChange",
      tags: ["auth"],
      summary: "Ask to change the caller's address: a link to the new one, a notice to the current one.",
      description:
        "Needs the current password (counted in the password windows). The address changes only when the " +
        "link mailed to the new address is followed (POST /api/auth/email/change/confirm). The answer is " +
        "202 whether or not another account has the new address (it then gets no link). Refused (403) in " +
        "an impersonated session.",
      request: {
        body: jsonBody(
          z
            .object({
              newEmail: z.email().max(320),
              currentPassword: z.string().min(1).max(1024),
            })
            .openapi("EmailChangeRequest"),
        ),
      },
      responses: {
        202: { description: "Accepted: the link and the notice are on their way." },
        400: problem("The new address is not valid, or is the current one."),
        401: problem("Wrong current password."),
        429: problem("Too many password attempts."),
      },
    },
    { cookies: true },
  ),
  confirm: apiRoute("public", {
    method: "post",
    path: "/api/auth/email/change/confirm",
    operationId: "confirmEmailChange",
    tags: ["auth"],
    summary: "Change the address with the token of the link mailed to the new one; it is verified.",
    request: {
      body: jsonBody(
        z
          .object({
            token: z
              .string()
              .min(16)
              .max(256)
              .openapi({ description: "The `token` of the link in the message." }),
          })
          .openapi("EmailChangeConfirmation"),
      ),
    },
    responses: {
      204: { description: "The address is changed and verified." },
      404: problem("The link is unknown, used or expired (the same answer for each)."),
      409: problem("Another account has the new address now."),
    },
  }),
};

/** A change of address: asked for by the signed-in user, done by the link sent to the new address. */
export function emailChangeRoutes(deps: AuthRouteDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const router = createRouter();
  for (const route of Object.values(routes))
    if (accessOf(route) === "signedIn") router.use(routerPath(route), authenticated);
  return router
    .openapi(routes.request, async (c) => {
      await requestEmailChange(deps, ctxOf(c), c.req.valid("json"));
      return c.body(null, 202);
    })
    .openapi(routes.confirm, async (c) => {
      await confirmEmailChange(deps, anonymousCtxOf(c, c.get("tenant")?.id ?? null), c.req.valid("json"));
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const emailChangeArea = defineArea({
  name: "auth-email-change",
  routes: [emailChangeRoutes],
  auditActions: EMAIL_CHANGE_ACTIONS,
});
