import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { getTenantSettings, updateTenantSettings } from "../../tenancy/tenant-settings.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, problem, tenantIdParam } from "../openapi.ts";
import { adminCtxOf, createRouter, tenantCtxOf } from "../request-context.ts";
import { TENANT_SETTINGS_ACTIONS } from "./tenant-settings-actions.ts";

const settingsSchema = z
  .object({
    privateIdentities: z.boolean().openapi({
      description:
        "Invitees get an account of this tenant's own, never the shared sign-in they may have elsewhere (they cannot switch to or from another tenant).",
    }),
    emailSignIn: z.boolean().openapi({
      description:
        "Members may sign in with a code or link mailed to their address (POST /api/auth/email/code).",
    }),
  })
  .openapi("TenantSettings");
const settingsChange = z
  .object({ privateIdentities: z.boolean().optional(), emailSignIn: z.boolean().optional() })
  .strict()
  .openapi("TenantSettingsChange");

const show = apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
  method: "get",
  path: "/api/tenant/settings",
  operationId: "getTenantSettings",
  tags: ["tenant"],
  summary: "The caller's tenant's sign-in settings.",
  responses: { 200: json("The settings.", settingsSchema) },
});
const change = apiRoute(tenantAccess(["owner"], { apiKey: "none" }), {
  method: "patch",
  path: "/api/tenant/settings",
  operationId: "updateTenantSettings",
  tags: ["tenant"],
  summary: "Change the caller's tenant's sign-in settings (owners only); the ones not given stay.",
  request: { body: jsonBody(settingsChange) },
  responses: { 200: json("The settings now.", settingsSchema), 400: problem("An unknown setting.") },
});
const adminShow = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/settings",
  operationId: "adminGetTenantSettings",
  tags: ["admin"],
  summary: "A tenant's sign-in settings.",
  request: { params: tenantIdParam },
  responses: { 200: json("The settings.", settingsSchema), 404: problem("No such tenant.") },
});
const adminChange = apiRoute("platform", {
  method: "patch",
  path: "/api/admin/tenants/{tenantId}/settings",
  operationId: "adminUpdateTenantSettings",
  tags: ["admin"],
  summary: "Change a tenant's sign-in settings; the ones not given stay.",
  request: { params: tenantIdParam, body: jsonBody(settingsChange) },
  responses: {
    200: json("The settings now.", settingsSchema),
    400: problem("An unknown setting."),
    404: problem("No such tenant."),
  },
});

/** A tenant's sign-in settings: its owners (admins read) and platform admins. */
export function tenantSettingsRoutes(deps: Deps) {
  return createRouter()
    .openapi(show, async (c) => c.json(await getTenantSettings(deps, tenantCtxOf(c)), 200))
    .openapi(change, async (c) =>
      c.json(await updateTenantSettings(deps, tenantCtxOf(c), c.req.valid("json")), 200),
    )
    .openapi(adminShow, async (c) =>
      c.json(await getTenantSettings(deps, adminCtxOf(c, c.req.valid("param").tenantId)), 200),
    )
    .openapi(adminChange, async (c) =>
      c.json(
        await updateTenantSettings(deps, adminCtxOf(c, c.req.valid("param").tenantId), c.req.valid("json")),
        200,
      ),
    );
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const tenantSettingsArea = defineArea({
  name: "tenant-settings",
  routes: [tenantSettingsRoutes],
  auditActions: TENANT_SETTINGS_ACTIONS,
});
