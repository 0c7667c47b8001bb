import { z } from "@hono/zod-openapi";
import type { AuthDeps } from "../../auth/deps.ts";
import { startImpersonation } from "../../auth/impersonation.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, problem } from "../openapi.ts";
import { createRouter, ctxOf } from "../request-context.ts";
import { IMPERSONATIONS_ACTIONS } from "./admin-impersonations-actions.ts";
import { tokenPair } from "./auth.ts";

const start = apiRoute("platform", {
  method: "post",
  path: "/api/admin/impersonations",
  operationId: "startImpersonation",
  tags: ["admin"],
  summary: "Sign in as a tenant's user for a few minutes, with a reason (platform admins; never viewers).",
  description:
    "The token pair's access tokens carry `act: { sub: <admin id> }` (RFC 8693). The session cannot " +
    "change passwords, second factors or API keys (403), ends after `minutes`, and every action in it " +
    "is audited under the user with the admin as `impersonatorId`.",
  request: {
    body: jsonBody(
      z
        .object({
          userId: z.uuid(),
          tenant: z.string().min(1).max(64).openapi({ description: "The tenant's code or id." }),
          reason: z.string().trim().min(3).max(300),
          minutes: z.number().int().min(1).max(60).openapi({
            description: "At most `Authentication:Impersonation:MaxMinutes` (60 unless set lower).",
          }),
        })
        .openapi("ImpersonationRequest"),
    ),
  },
  responses: {
    200: json("The impersonated session's token pair.", tokenPair),
    403: problem("`forbidden`: platform staff (and yourself) cannot be impersonated."),
    404: problem("No such tenant, or no active user of it with this id."),
  },
});

/** Platform admins start an impersonation (docs/auth.md, "Impersonation"). */
export function adminImpersonationRoutes(deps: AuthDeps) {
  return createRouter().openapi(start, async (c) => {
    c.header("cache-control", "no-store");
    return c.json(await startImpersonation(deps, ctxOf(c, null), c.req.valid("json")), 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const impersonationsArea = defineArea({
  name: "admin-impersonations",
  routes: [adminImpersonationRoutes],
  auditActions: IMPERSONATIONS_ACTIONS,
});
