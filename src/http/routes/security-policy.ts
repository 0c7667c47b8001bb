import { z } from "@hono/zod-openapi";
import type { AuthDeps } from "../../auth/deps.ts";
import { getSecurityPolicy, requireMfaValues, updateSecurityPolicy } from "../../auth/security-policy.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { TENANT_ROLES } from "../console/layout.ts";
import { securityPolicyPages } from "../console/pages-security-policy.ts";
import { apiRoute, json, jsonBody, problem } from "../openapi.ts";
import { createRouter, tenantCtxOf } from "../request-context.ts";
import { SECURITY_POLICY_ACTIONS } from "./security-policy-actions.ts";

const policy = z
  .object({
    requireMfa: z.enum(requireMfaValues).openapi({
      description: "Who must have a second factor: nobody, owners and admins, or every member.",
    }),
    enrolmentGraceDays: z.number().int().openapi({
      description: "Days a member the policy holds may still sign in without a factor, from `requiredSince`.",
    }),
    requiredSince: z.string().nullable().openapi({ description: "When the policy began to hold them." }),
    allowTrustedDevices: z.boolean().openapi({
      description:
        "Whether a browser a member trusted at a sign-in step (`trustDevice: true`) skips the step later " +
        "(Authentication:Mfa:TrustedDeviceDays). Off by default; switching it off revokes every trusted device.",
    }),
  })
  .openapi("SecurityPolicy");
const policyChange = z
  .object({
    requireMfa: z.enum(requireMfaValues).optional(),
    enrolmentGraceDays: z.number().int().min(0).max(90).optional(),
    allowTrustedDevices: z.boolean().optional(),
  })
  .strict()
  .openapi("SecurityPolicyChange");

const show = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "get",
  path: "/api/tenant/security-policy",
  operationId: "getSecurityPolicy",
  tags: ["tenant"],
  summary: "The tenant's second-factor policy.",
  responses: { 200: json("The policy.", policy) },
});
const change = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "put",
  path: "/api/tenant/security-policy",
  operationId: "updateSecurityPolicy",
  tags: ["tenant"],
  summary: "Change the tenant's second-factor policy (after a fresh second factor); fields not given stay.",
  request: { body: jsonBody(policyChange) },
  responses: {
    200: json("The policy now.", policy),
    400: problem("An unknown field or a value out of range."),
    401: problem("A recent second factor is required (step-up)."),
  },
});

const view = (p: Awaited<ReturnType<typeof getSecurityPolicy>>) => ({
  ...p,
  requiredSince: p.requiredSince?.toISOString() ?? null,
});

/** `GET|PUT /api/tenant/security-policy` (docs/auth.md "Policies"). */
export function securityPolicyRoutes(deps: AuthDeps) {
  return createRouter()
    .openapi(show, async (c) => c.json(view(await getSecurityPolicy(deps, tenantCtxOf(c))), 200))
    .openapi(change, async (c) =>
      c.json(view(await updateSecurityPolicy(deps, tenantCtxOf(c), c.req.valid("json"))), 200),
    );
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const securityPolicyArea = defineArea({
  name: "security-policy",
  routes: [securityPolicyRoutes],
  auditActions: SECURITY_POLICY_ACTIONS,
  consolePages: [
    {
      path: "/console/security-policy",
      title: "Security policy",
      seenBy: TENANT_ROLES,
      routes: securityPolicyPages,
    },
  ],
});
