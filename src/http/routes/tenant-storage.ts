import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import {
  createTenantDownload,
  createTenantUpload,
  deleteTenantObject,
  listTenantObjects,
} from "../../storage/tenant-objects.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, pageQuery, problem } from "../openapi.ts";
import { createRouter, tenantCtxOf } from "../request-context.ts";

const keyQuery = z.object({
  key: z
    .string()
    .min(1)
    .max(1024)
    .openapi({ param: { name: "key", in: "query" } }),
});

/**
 * The content types an upload may have, as the document's pattern: a type of
 * `Storage:AllowedMimeTypes` as configured (lower case), optionally followed by parameters
 * (`; charset=utf-8`) of printable ASCII. The object store's own check (object-storage.ts) refuses
 * nothing this matches, so the document states the whole rule.
 */
export function contentTypePattern(allowed: readonly string[]): string {
  const types = [...new Set(allowed.map((type) => type.trim().toLowerCase()))].sort();
  return `^(?:${types.map((type) => type.replaceAll(/[.*+?^${}()|[\]\\/-]/g, "\\$&")).join("|")})(?:;[ -~]*)?$`;
}

/** The upload route of one configuration: its content types are the configured allowlist. */
const createUploadRoute = (allowed: readonly string[]) =>
  apiRoute(tenantAccess("everyone", { apiKey: "storage:*" }), {
    method: "post",
    path: "/api/tenant/storage/uploads",
    operationId: "createUpload",
    tags: ["storage"],
    summary:
      "Start an upload: returns a presigned PUT URL whose content type and exact length are signed. Send the returned headers unchanged.",
    request: {
      body: jsonBody(
        z
          .object({
            key: z.string().min(1).max(1024),
            contentType: z
              .string()
              .max(255)
              .regex(new RegExp(contentTypePattern(allowed)), "not an allowed content type")
              .openapi({
                description: `One of \`Storage:AllowedMimeTypes\` (${[...allowed].sort().join(", ")}), lower case, with optional parameters (\`; charset=utf-8\`).`,
              }),
            size: z.number().int().min(0),
          })
          .openapi("UploadRequest"),
      ),
    },
    responses: {
      201: json(
        "The presigned upload.",
        z
          .object({
            key: z.string(),
            method: z.literal("PUT"),
            url: z.string(),
            headers: z.object({ "content-type": z.string(), "content-length": z.string() }),
            expiresAt: z.string(),
          })
          .openapi("PresignedUpload"),
      ),
      402: problem("`payment_required`: the tenant's plan has no storage."),
      403: problem(
        "`usage_limit_reached`: the upload would take the tenant past its `storage_bytes` limit (a suspended tenant's is 0); `forbidden`: a member writing to a key another user's object is stored under.",
      ),
      413: problem("Larger than Storage:MaxUploadBytes."),
      400: problem(
        "Invalid body: the problem's `errors` name the field (`key`, `contentType`: not an allowed type, `size`).",
      ),
      503: problem("Object storage is not configured."),
    },
  });

const list = apiRoute(tenantAccess("everyone", { apiKey: "storage:*" }), {
  method: "get",
  path: "/api/tenant/storage/objects",
  operationId: "listObjects",
  tags: ["storage"],
  summary: "List the tenant's objects (keys relative to the tenant).",
  request: {
    query: z.object({
      prefix: z.string().max(1024).optional(),
      ...pageQuery,
    }),
  },
  responses: {
    200: json(
      "A page of objects; pass nextCursor as cursor for the next one.",
      z
        .object({
          items: z.array(
            z.object({ key: z.string(), size: z.number(), lastModified: z.string().nullable() }),
          ),
          nextCursor: z.string().nullable(),
        })
        .openapi("ObjectList"),
    ),
  },
});

const download = apiRoute(tenantAccess("everyone", { apiKey: "storage:*" }), {
  method: "get",
  path: "/api/tenant/storage/objects/download",
  operationId: "getObjectDownload",
  tags: ["storage"],
  summary: "A presigned download URL for one of the tenant's objects.",
  request: { query: keyQuery },
  responses: {
    200: json(
      "The presigned download.",
      z.object({ key: z.string(), url: z.string(), expiresAt: z.string() }).openapi("PresignedDownload"),
    ),
    404: problem("The tenant has no such object."),
  },
});

const remove = apiRoute(tenantAccess("everyone", { apiKey: "storage:*" }), {
  method: "delete",
  path: "/api/tenant/storage/objects",
  operationId: "deleteObject",
  tags: ["storage"],
  summary: "Delete one of the tenant's objects.",
  request: { query: keyQuery },
  responses: { 204: { description: "Deleted." }, 404: problem("The tenant has no such object.") },
});

/**
 * Tenant users' object storage, always within their own tenant's prefix (from the principal,
 * never from the request).
 */
export function tenantStorageRoutes(deps: Deps) {
  return createRouter()
    .openapi(createUploadRoute(deps.config.settings.Storage.AllowedMimeTypes), async (c) => {
      const upload = await createTenantUpload(deps, tenantCtxOf(c), c.req.valid("json"));
      return c.json({ ...upload, expiresAt: upload.expiresAt.toISOString() }, 201);
    })
    .openapi(list, async (c) => {
      const page = await listTenantObjects(deps, tenantCtxOf(c), c.req.valid("query"));
      return c.json(
        {
          items: page.items.map((i) => ({ ...i, lastModified: i.lastModified?.toISOString() ?? null })),
          nextCursor: page.nextCursor,
        },
        200,
      );
    })
    .openapi(download, async (c) => {
      const out = await createTenantDownload(deps, tenantCtxOf(c), c.req.valid("query"));
      c.header("cache-control", "no-store");
      return c.json({ ...out, expiresAt: out.expiresAt.toISOString() }, 200);
    })
    .openapi(remove, async (c) => {
      await deleteTenantObject(deps, tenantCtxOf(c), c.req.valid("query"));
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const storageArea = defineArea({ name: "tenant-storage", routes: [tenantStorageRoutes] });
