import { createHash, randomUUID } from "node:crypto";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { recordUsage } from "../usage/ledger.ts";
import type { ObjectStorage, PresignedDownload, PresignedUpload, StoredObject } from "./object-storage.ts";

/**
 * A tenant's own objects, always within its prefix (the tenant comes from the ctx, never from the
 * request), and their `storage_bytes` usage.
 */
export type TenantObjectDeps = Pick<Deps, "storage" | "database" | "cache" | "clock" | "logger" | "config">;

function storageOf(deps: TenantObjectDeps): ObjectStorage {
  if (!deps.storage)
    throw new AppError("unavailable", "Object storage is not configured (Storage:S3:Bucket).");
  return deps.storage;
}

/**
 * Grants an upload: a presigned PUT whose content type and exact length are signed, counted in
 * `storage_bytes` as it is granted. The request itself is checked first (key, type 415, size 413;
 * presigning is local and the URL is dropped if the plan refuses), then the plan: off → 402; used +
 * size over the limit → 403. An empty object still counts as something new (a suspended tenant's
 * limit of 0 refuses every upload). A URL never used, or an upload over an existing key, over-counts
 * until the object is deleted (docs/billing.md).
 */
export async function createTenantUpload(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { key: string; contentType: string; size: number },
): Promise<PresignedUpload> {
  const { tenantId } = ctx;
  const upload = await storageOf(deps).createUpload(tenantId, input);
  await assertFeature(deps, tenantId, "storage_bytes", Math.max(input.size, 1));
  if (input.size > 0)
    await recordUsage(deps, {
      tenantId,
      feature: "storage_bytes",
      quantity: input.size,
      idempotencyKey: `storage_bytes:upload:${randomUUID()}`,
    });
  return upload;
}

export async function listTenantObjects(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { prefix?: string; cursor?: string; limit: number },
): Promise<{ items: StoredObject[]; nextCursor: string | null }> {
  return storageOf(deps).listObjects(ctx.tenantId, input);
}

export async function createTenantDownload(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { key: string },
): Promise<PresignedDownload> {
  return storageOf(deps).createDownload(ctx.tenantId, input.key);
}

/**
 * Deletes one of the tenant's objects and gives its bytes back to `storage_bytes`. The refund is
 * keyed by the object version: deletes of one object that race (each saw it before the other
 * removed it) give its bytes back once.
 */
export async function deleteTenantObject(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { key: string },
): Promise<void> {
  const { tenantId } = ctx;
  const { size, version } = await storageOf(deps).deleteObject(tenantId, input.key);
  if (size > 0)
    await recordUsage(deps, {
      tenantId,
      feature: "storage_bytes",
      quantity: -size,
      idempotencyKey: `storage_bytes:delete:${createHash("sha256").update(`${tenantId}\u0000${input.key}\u0000${version}`).digest("hex")}`,
    });
}
