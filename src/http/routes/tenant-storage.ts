import { createHash, randomUUID } from "node:crypto";
import { createRoute, z } from "@hono/zod-openapi";
import { assertFeature } from "../../billing/entitlements.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { createObjectStorage, type ObjectStorage } from "../../storage/object-storage.ts";
import { recordUsage } from "../../usage/ledger.ts";
import { createRouter } from "../context.ts";
import { tenantPrincipal } from "../guards.ts";
import { problem } from "../openapi.ts";

const keyQuery = z.object({
  key: z
    .string()
    .min(1)
    .max(1024)
    .openapi({ param: { name: "key", in: "query" } }),
});

const createUpload = createRoute({
  method: "post",
  path: "/api/tenant/storage/uploads",
  tags: ["storage"],
  summary:
    "Start an upload: returns a presigned PUT URL whose content type and exact length are signed. Send the returned headers unchanged.",
  request: {
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.object({
            key: z.string().min(1).max(1024),
            contentType: z.string().min(1).max(255),
            size: z.number().int().min(0),
          }),
        },
      },
    },
  },
  responses: {
    201: {
      description: "The presigned upload.",
      content: {
        "application/json": {
          schema: z
            .object({
              key: z.string(),
              method: z.literal("PUT"),
              url: z.string(),
              headers: z.object({ "content-type": z.string(), "content-length": z.string() }),
              expiresAt: z.string(),
            })
            .openapi("PresignedUpload"),
        },
      },
    },
    400: problem("The key is not valid."),
    402: problem("`payment_required`: the tenant's plan has no storage."),
    403: problem(
      "`usage_limit_reached`: the upload would take the tenant past its `storage_bytes` limit (a suspended tenant's is 0).",
    ),
    413: problem("Larger than Storage:MaxUploadBytes."),
    415: problem("Content type not in Storage:AllowedMimeTypes."),
    503: problem("Object storage is not configured."),
  },
});

const list = createRoute({
  method: "get",
  path: "/api/tenant/storage/objects",
  tags: ["storage"],
  summary: "List the tenant's objects (keys relative to the tenant).",
  request: {
    query: z.object({
      prefix: z.string().max(1024).optional(),
      cursor: z.string().max(1024).optional(),
      limit: z.coerce.number().int().min(1).max(1000).default(100),
    }),
  },
  responses: {
    200: {
      description: "A page of objects; pass nextCursor as cursor for the next one.",
      content: {
        "application/json": {
          schema: z.object({
            items: z.array(
              z.object({ key: z.string(), size: z.number(), lastModified: z.string().nullable() }),
            ),
            nextCursor: z.string().nullable(),
          }),
        },
      },
    },
  },
});

const download = createRoute({
  method: "get",
  path: "/api/tenant/storage/objects/download",
  tags: ["storage"],
  summary: "A presigned download URL for one of the tenant's objects.",
  request: { query: keyQuery },
  responses: {
    200: {
      description: "The presigned download.",
      content: {
        "application/json": {
          schema: z
            .object({ key: z.string(), url: z.string(), expiresAt: z.string() })
            .openapi("PresignedDownload"),
        },
      },
    },
    404: problem("The tenant has no such object."),
  },
});

const remove = createRoute({
  method: "delete",
  path: "/api/tenant/storage/objects",
  tags: ["storage"],
  summary: "Delete one of the tenant's objects.",
  request: { query: keyQuery },
  responses: { 204: { description: "Deleted." }, 404: problem("The tenant has no such object.") },
});

/**
 * Tenant users' object storage, always within their own tenant's prefix (from the principal,
 * never from the request). Mounted behind the auth guards, which set `principal`.
 */
export function tenantStorageRoutes(deps: Deps, options: { storage?: ObjectStorage | null } = {}) {
  const storage =
    options.storage === undefined
      ? createObjectStorage(deps.config, { clock: deps.clock, telemetry: deps.telemetry })
      : options.storage;
  const use = (): ObjectStorage => {
    if (!storage) throw new AppError("unavailable", "Object storage is not configured (Storage:S3:Bucket).");
    return storage;
  };
  return createRouter()
    .openapi(createUpload, async (c) => {
      const { tenantId } = tenantPrincipal(c.get("principal"));
      const input = c.req.valid("json");
      const store = use();
      // the request itself first (key, type 415, size 413; presigning is local and the URL is
      // dropped if the plan refuses), then the plan's storage_bytes: off → 402; used + size over
      // the limit → 403. An empty object still counts as something new (a suspended tenant's
      // limit of 0 refuses every upload).
      const upload = await store.createUpload(tenantId, input);
      await assertFeature(deps, tenantId, "storage_bytes", Math.max(input.size, 1));
      // counted when the upload is granted (its exact length is signed): a URL never used, or an
      // upload over an existing key, over-counts until the object is deleted (docs/billing.md)
      if (input.size > 0)
        await recordUsage(deps, {
          tenantId,
          feature: "storage_bytes",
          quantity: input.size,
          idempotencyKey: `storage_bytes:upload:${randomUUID()}`,
        });
      return c.json({ ...upload, expiresAt: upload.expiresAt.toISOString() }, 201);
    })
    .openapi(list, async (c) => {
      const { tenantId } = tenantPrincipal(c.get("principal"));
      const page = await use().listObjects(tenantId, c.req.valid("query"));
      return c.json(
        {
          items: page.items.map((i) => ({ ...i, lastModified: i.lastModified?.toISOString() ?? null })),
          nextCursor: page.nextCursor,
        },
        200,
      );
    })
    .openapi(download, async (c) => {
      const { tenantId } = tenantPrincipal(c.get("principal"));
      const out = await use().createDownload(tenantId, c.req.valid("query").key);
      c.header("cache-control", "no-store");
      return c.json({ ...out, expiresAt: out.expiresAt.toISOString() }, 200);
    })
    .openapi(remove, async (c) => {
      const { tenantId } = tenantPrincipal(c.get("principal"));
      const key = c.req.valid("query").key;
      const { size, version } = await use().deleteObject(tenantId, key);
      // keyed by the object version: deletes of one object that race (each saw it before the
      // other removed it) give its bytes back once
      if (size > 0)
        await recordUsage(deps, {
          tenantId,
          feature: "storage_bytes",
          quantity: -size,
          idempotencyKey: `storage_bytes:delete:${createHash("sha256").update(`${tenantId}\u0000${key}\u0000${version}`).digest("hex")}`,
        });
      return c.body(null, 204);
    });
}
