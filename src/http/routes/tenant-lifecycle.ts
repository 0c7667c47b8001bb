import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { cancelTenantDeletion, scheduleTenantDeletion } from "../../tenant-lifecycle/deletion.ts";
import { getTenantExport, MIN_PASSPHRASE, startTenantExport } from "../../tenant-lifecycle/exports.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, problem, tenantIdParam } from "../openapi.ts";
import { adminCtxOf, createRouter, ctxOf, tenantCtxOf } from "../request-context.ts";
import { TENANT_LIFECYCLE_ACTIONS } from "./tenant-lifecycle-actions.ts";

const started = z.object({ id: z.uuid() }).openapi("TenantExportStarted");
const exportView = z
  .object({
    id: z.uuid(),
    status: z.enum(["pending", "running", "succeeded", "failed"]),
    progress: z.number().int().min(0).max(100).openapi({ description: "0–100." }),
    downloadUrl: z.string().optional().openapi({
      description: "Once succeeded: a presigned link to the `.tar.gz` archive, made for this read.",
    }),
    downloadExpiresAt: z.string().optional().openapi({ description: "When `downloadUrl` stops working." }),
    manifest: z.record(z.string(), z.unknown()).optional().openapi({
      description:
        "Once succeeded: counts, SHA-256 of each file, the schema version (docs/tenant-lifecycle.md).",
    }),
    error: z.string().optional().openapi({ description: "Why a failed export failed." }),
  })
  .openapi("TenantExport");
const exportIdParam = z.object({ exportId: z.uuid().openapi({ param: { name: "exportId", in: "path" } }) });

const adminStart = apiRoute("platform", {
  method: "post",
  path: "/api/admin/tenants/{tenantId}/exports",
  operationId: "adminStartTenantExport",
  tags: ["admin"],
  summary: "Export every row and object of a tenant into one archive (a job; follow it with the GET).",
  request: {
    params: tenantIdParam,
    body: {
      ...jsonBody(
        z
          .object({
            secretsPassphrase: z.string().min(MIN_PASSPHRASE).max(1024).optional().openapi({
              description:
                "Include the provider secrets, sealed to a key derived from this passphrase (scrypt); without it they are left out. Stored nowhere.",
            }),
          })
          .openapi("NewTenantExport"),
      ),
      required: false,
    },
  },
  responses: {
    202: json("The export was started.", started),
    404: problem("No such tenant."),
    503: problem("Object storage is not configured."),
  },
});

const adminShow = apiRoute("platform", {
  method: "get",
  path: "/api/admin/tenants/{tenantId}/exports/{exportId}",
  operationId: "adminGetTenantExport",
  tags: ["admin"],
  summary: "A tenant export: its state, progress and, once written, its manifest and a download link.",
  request: { params: tenantIdParam.extend(exportIdParam.shape) },
  responses: {
    200: json("The export.", exportView),
    404: problem("No such tenant or export."),
  },
});

const ownerStart = apiRoute(tenantAccess(["owner"], { apiKey: "none" }), {
  method: "post",
  path: "/api/tenant/exports",
  operationId: "startTenantExport",
  tags: ["tenant"],
  summary: "Export every row and object of your tenant into one archive, provider secrets left out (a job).",
  responses: {
    202: json("The export was started.", started),
    503: problem("Object storage is not configured."),
  },
});

const ownerShow = apiRoute(tenantAccess(["owner"], { apiKey: "none" }), {
  method: "get",
  path: "/api/tenant/exports/{exportId}",
  operationId: "getTenantExport",
  tags: ["tenant"],
  summary: "One of your tenant's exports: its state, progress and, once written, a download link.",
  request: { params: exportIdParam },
  responses: {
    200: json("The export.", exportView),
    404: problem("No such export."),
  },
});

const deletionView = z
  .object({
    tenantId: z.uuid(),
    scheduledFor: z.string().openapi({ description: "When the deletion job runs; cancel before then." }),
  })
  .openapi("TenantDeletion");

const scheduleDeletion = apiRoute("platform", {
  method: "post",
  path: "/api/admin/tenants/{tenantId}/deletion",
  operationId: "adminScheduleTenantDeletion",
  tags: ["admin"],
  summary:
    "Schedule the tenant's deletion after a grace period (default `Tenancy:DeletionGraceDays`); scheduling again moves it.",
  request: {
    params: tenantIdParam,
    body: {
      ...jsonBody(
        z
          .object({
            graceDays: z.number().int().min(0).max(365).optional().openapi({
              description: "Days until the deletion (0: at once, by the job loop).",
            }),
          })
          .openapi("NewTenantDeletion"),
      ),
      required: false,
    },
  },
  responses: {
    202: json("The deletion is scheduled.", deletionView),
    404: problem("No such tenant."),
  },
});

const cancelDeletion = apiRoute("platform", {
  method: "delete",
  path: "/api/admin/tenants/{tenantId}/deletion",
  operationId: "adminCancelTenantDeletion",
  tags: ["admin"],
  summary: "Cancel the tenant's scheduled deletion, if it has not started.",
  request: { params: tenantIdParam },
  responses: {
    204: { description: "Canceled." },
    404: problem("No such tenant, or no deletion scheduled, or it has started."),
  },
});

/** Tenant exports: platform admins for any tenant, owners for their own (docs/tenant-lifecycle.md). */
export function tenantLifecycleRoutes(deps: Deps) {
  return createRouter()
    .openapi(adminStart, async (c) => {
      const { tenantId } = c.req.valid("param");
      const body = c.req.header("content-type") ? c.req.valid("json") : {};
      const ctx = adminCtxOf(c, tenantId);
      return c.json(await startTenantExport(deps, ctx, { secretsPassphrase: body?.secretsPassphrase }), 202);
    })
    .openapi(adminShow, async (c) => {
      const { tenantId, exportId } = c.req.valid("param");
      return c.json(await getTenantExport(deps, adminCtxOf(c, tenantId), { exportId }), 200);
    })
    .openapi(scheduleDeletion, async (c) => {
      const { tenantId } = c.req.valid("param");
      const body = c.req.header("content-type") ? c.req.valid("json") : {};
      return c.json(
        await scheduleTenantDeletion(deps, ctxOf(c), { tenantId, graceDays: body?.graceDays }),
        202,
      );
    })
    .openapi(cancelDeletion, async (c) => {
      await cancelTenantDeletion(deps, ctxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    })
    .openapi(ownerStart, async (c) => c.json(await startTenantExport(deps, tenantCtxOf(c), {}), 202))
    .openapi(ownerShow, async (c) =>
      c.json(await getTenantExport(deps, tenantCtxOf(c), c.req.valid("param")), 200),
    );
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const tenantLifecycleArea = defineArea({
  name: "tenant-lifecycle",
  routes: [tenantLifecycleRoutes],
  auditActions: TENANT_LIFECYCLE_ACTIONS,
});
