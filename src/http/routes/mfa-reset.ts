import { z } from "@hono/zod-openapi";
import type { AuthDeps } from "../../auth/deps.ts";
import { resetMemberFactors } from "../../auth/mfa-reset.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, problem } from "../openapi.ts";
import { adminCtxOf, createRouter, tenantCtxOf } from "../request-context.ts";
import { MFA_RESET_ACTIONS } from "./mfa-reset-actions.ts";

const reset = z
  .object({
    removed: z
      .array(z.string())
      .openapi({ description: "The kinds removed (`totp`, `backup_code`, `passkey`)." }),
  })
  .openapi("MfaReset");

const tenantReset = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "delete",
  path: "/api/tenant/users/{userId}/mfa",
  operationId: "resetTenantUserFactors",
  tags: ["tenant"],
  summary:
    "Remove every second factor of a member (recovery; after a fresh second factor). The member is e-mailed.",
  request: { params: z.object({ userId: z.uuid() }) },
  responses: {
    200: json("Reset.", reset),
    401: problem("A recent second factor is required (step-up)."),
    403: problem("`forbidden`: an owner's factors, or your own."),
    404: problem("No such user in this tenant."),
  },
});
const adminReset = apiRoute("platform", {
  method: "delete",
  path: "/api/admin/tenants/{tenantId}/users/{userId}/mfa",
  operationId: "adminResetTenantUserFactors",
  tags: ["admin"],
  summary: "Remove every second factor of a tenant's user, owners included (platform admins).",
  request: { params: z.object({ tenantId: z.uuid(), userId: z.uuid() }) },
  responses: { 200: json("Reset.", reset), 404: problem("No such user in this tenant.") },
});

/** Recovery of a member's second factors (docs/auth.md "Recovery"). */
export function mfaResetRoutes(deps: AuthDeps) {
  return createRouter()
    .openapi(tenantReset, async (c) =>
      c.json(await resetMemberFactors(deps, tenantCtxOf(c), c.req.valid("param")), 200),
    )
    .openapi(adminReset, async (c) => {
      const { tenantId, userId } = c.req.valid("param");
      return c.json(await resetMemberFactors(deps, adminCtxOf(c, tenantId), { userId }), 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const mfaResetArea = defineArea({
  name: "mfa-reset",
  routes: [mfaResetRoutes],
  auditActions: MFA_RESET_ACTIONS,
});
