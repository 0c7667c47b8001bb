import { createHash, randomUUID } from "node:crypto";
import { and, eq, gt, inArray, isNotNull, isNull, lte, ne, or, sql } from "drizzle-orm";
import { z } from "zod";
import { assertFeature } from "../billing/entitlements.ts";
import { actorUserId, systemCtx, type TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { storageGrants } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { cursorCodec, type Page } from "../pagination.ts";
import { getCurrentUsage } from "../usage/current-usage.ts";
import { recordUsage } from "../usage/record-usage.ts";
import type { ObjectStorage, PresignedDownload, PresignedUpload, StoredObject } from "./object-storage.ts";

/**
 * A tenant's own objects, always within its prefix (the tenant comes from the ctx, never from the
 * request), and their `storage_bytes` usage. Every presigned upload is a grant (`storage_grants`):
 * one object version (`<key>~g~<grant id>`), one exact size, charged when granted and refunded
 * once when deleted — and not before its URL has expired, so a URL reused after a delete only
 * ever writes bytes that are still charged (docs/billing.md).
 */
export type TenantObjectDeps = Pick<Deps, "storage" | "database" | "cache" | "clock" | "logger" | "config">;

/** How far the store's clock may run behind ours (a URL still accepted there after it expired here). */
const CLOCK_SKEW_MS = 60_000;

function storageOf(deps: TenantObjectDeps): ObjectStorage {
  if (!deps.storage)
    throw new AppError("unavailable", "Object storage is not configured (Storage:S3:Bucket).");
  return deps.storage;
}

/** Tenant members manage only the objects they uploaded; owners and admins manage all of them. */
function managesAll(ctx: TenantCtx): boolean {
  if (ctx.actor.type !== "user") return true;
  return ctx.actor.roles.includes("owner") || ctx.actor.roles.includes("admin");
}

/**
 * A member may delete a key, and write to it, only when every stored version of it is one they
 * uploaded (a plain object, without a grant, is nobody's); writing also needs no other caller's
 * upload URL for the key to be still open. Owners, admins and keys manage every key. So a member
 * cannot replace another member's object (what everyone downloads) nor take its delete away; the
 * first writer keeps it (issue #29, docs/roles.md).
 */
async function assertMemberOwnsKey(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  key: string,
  verb: "delete" | "write",
): Promise<void> {
  if (managesAll(ctx)) return;
  const { tenantId } = ctx;
  const me = actorUserId(ctx) ?? "";
  // a key with nothing stored is free to write (and a 404 to delete, as before)
  const versions = await storageOf(deps)
    .versions(tenantId, key)
    .catch((error: unknown) => {
      if (verb === "write" && error instanceof AppError && error.code === "not_found") return [];
      throw error;
    });
  const grantIds = versions.map((v) => v.grantId).filter((id): id is string => id !== null);
  const notMine = or(isNull(storageGrants.uploadedBy), ne(storageGrants.uploadedBy, me));
  const stored = grantIds.length > 0 ? inArray(storageGrants.id, grantIds) : undefined;
  const open =
    verb === "write"
      ? and(
          eq(storageGrants.key, key),
          isNull(storageGrants.deletedAt),
          gt(storageGrants.expiresAt, deps.clock.now()),
        )
      : undefined;
  const others =
    stored || open
      ? await withDatabase(deps, ctx, (db) =>
          db
            .select({ id: storageGrants.id })
            .from(storageGrants)
            .where(and(eq(storageGrants.tenantId, tenantId), or(stored, open), notMine))
            .limit(1),
        )
      : [];
  if (grantIds.length !== versions.length || others.length > 0)
    throw new AppError(
      "forbidden",
      verb === "delete"
        ? "Members delete only the objects they uploaded."
        : "Members write only to keys that are theirs: another user's object is stored under this key.",
    );
}

/**
 * Settles the tenant's grants whose URL has expired (nothing can write them any more):
 * - deleted ones: the object version is deleted once more (bytes a reused URL wrote after the
 *   delete, still charged until now), then the grant's charged size is refunded, once;
 * - never seen: if no object was stored (the URL was never used), the charge is refunded; if one
 *   was, the grant is confirmed and its charge stands until a delete.
 * Runs before the tenant's storage calls; resolves how many bytes were refunded.
 */
export async function settleStorageRefunds(deps: TenantObjectDeps, ctx: TenantCtx): Promise<number> {
  const { tenantId } = ctx;
  const now = deps.clock.now();
  // the store judges expiry by its own clock: settle only a margin after ours says expired
  const expiredBefore = new Date(now.getTime() - CLOCK_SKEW_MS);
  const due = await withDatabase(deps, ctx, (db) =>
    db
      .select({
        id: storageGrants.id,
        objectKey: storageGrants.objectKey,
        deletedAt: storageGrants.deletedAt,
      })
      .from(storageGrants)
      .where(
        and(
          eq(storageGrants.tenantId, tenantId),
          isNull(storageGrants.refundedAt),
          or(isNotNull(storageGrants.deletedAt), isNull(storageGrants.confirmedAt)),
          lte(storageGrants.expiresAt, expiredBefore),
        ),
      )
      .limit(100),
  );
  let refunded = 0;
  for (const grant of due) {
    if (grant.deletedAt) await storageOf(deps).deleteStored(grant.objectKey);
    else if (await storageOf(deps).isStored(grant.objectKey)) {
      await withDatabase(deps, ctx, (db) =>
        db
          .update(storageGrants)
          .set({ confirmedAt: now })
          .where(and(eq(storageGrants.id, grant.id), isNull(storageGrants.deletedAt))),
      );
      continue;
    }
    refunded += await refundGrant(deps, ctx, grant.id);
  }
  return refunded;
}

/** Marks the grant refunded and records its charged size back, in one transaction; 0 if already done. */
async function refundGrant(deps: TenantObjectDeps, ctx: TenantCtx, grantId: string): Promise<number> {
  const { tenantId } = ctx;
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx) => {
    const [row] = await tx
      .update(storageGrants)
      .set({
        refundedAt: now,
        deletedAt: sql`coalesce(${storageGrants.deletedAt}, ${now.toISOString()}::timestamptz)`,
      })
      .where(
        and(
          eq(storageGrants.id, grantId),
          eq(storageGrants.tenantId, tenantId),
          isNull(storageGrants.refundedAt),
        ),
      )
      .returning({ size: storageGrants.size });
    if (!row || row.size === 0) return 0;
    // a refund is Plinth's own correction, whoever's request settled it
    await recordUsage(
      deps,
      { ...systemCtx("storage", tenantId), tx },
      { feature: "storage_bytes", quantity: -row.size, idempotencyKey: `storage_bytes:refund:${grantId}` },
    );
    return row.size;
  });
}

/**
 * Grants an upload: a presigned PUT of one object version whose content type and exact length are
 * signed, recorded as a grant and counted in `storage_bytes` in one transaction. The request itself
 * is checked first (key, type 415, size 413; a member writes only to a key that is theirs, 403), then the plan: off → 402; used + size over the limit
 * → 403. An empty object still counts as something new (a suspended tenant's limit of 0 refuses
 * every upload). A URL never used is refunded once it has expired (settleStorageRefunds).
 */
export async function createTenantUpload(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { key: string; contentType: string; size: number },
): Promise<PresignedUpload> {
  const { tenantId } = ctx;
  const grantId = randomUUID();
  await assertMemberOwnsKey(deps, ctx, input.key, "write");
  const { objectKey, ...upload } = await storageOf(deps).createUpload(tenantId, { ...input, grantId });
  await settleStorageRefunds(deps, ctx);
  const { limit } = await assertFeature(deps, ctx, {
    feature: "storage_bytes",
    quantity: Math.max(input.size, 1),
  });
  await withTransaction(deps, ctx, async (tx) => {
    await tx.insert(storageGrants).values({
      id: grantId,
      tenantId,
      key: input.key,
      objectKey,
      size: input.size,
      uploadedBy: actorUserId(ctx),
      expiresAt: upload.expiresAt,
      createdAt: deps.clock.now(),
    });
    if (input.size > 0)
      await recordUsage(
        deps,
        { ...ctx, tx },
        {
          feature: "storage_bytes",
          quantity: input.size,
          idempotencyKey: `storage_bytes:upload:${grantId}`,
          limit,
        },
      );
  });
  return upload;
}

/** The objects list's position: the last stored key of the page, relative to the tenant. */
export const objectCursor = cursorCodec(z.object({ after: z.string().min(1).max(1100) }));

/**
 * One page of the tenant's objects, keys relative to its prefix; the cursor wraps the store's own
 * marker (the last stored key of the page, docs/secrets-and-storage.md).
 */
export async function listTenantObjects(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { prefix?: string; cursor?: string; limit: number },
): Promise<Page<StoredObject>> {
  const after = objectCursor.decodeOptional(input.cursor)?.after;
  await settleStorageRefunds(deps, ctx);
  const { items, last } = await storageOf(deps).listObjects(ctx.tenantId, {
    prefix: input.prefix,
    after,
    limit: input.limit,
  });
  return { items, nextCursor: last === null ? null : objectCursor.encode({ after: last }) };
}

export async function createTenantDownload(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { key: string },
): Promise<PresignedDownload> {
  return storageOf(deps).createDownload(ctx.tenantId, input.key);
}

/**
 * Deletes every version of one of the tenant's keys. A member may delete only what they uploaded
 * (403 otherwise, `assertMemberOwnsKey`); owners, admins and keys anything. Each upload version's grant is refunded its charged
 * size once — at once when its URL has expired, otherwise when it does (settleStorageRefunds).
 * A plain object (a server-side upload, or one from before grants) refunds its size keyed by its S3
 * version, never taking usage below zero.
 */
export async function deleteTenantObject(
  deps: TenantObjectDeps,
  ctx: TenantCtx,
  input: { key: string },
): Promise<void> {
  const { tenantId } = ctx;
  const storage = storageOf(deps);
  await assertMemberOwnsKey(deps, ctx, input.key, "delete");
  const deleted = await storage.deleteObject(tenantId, input.key);
  const now = deps.clock.now();
  // one write per version deleted from the store, each idempotent; not one transaction: a plain
  // object's refund reads the usage counter, whose rebuild waits for the counter locks it would hold
  for (const version of deleted) {
    const { grantId } = version;
    if (grantId) {
      await withDatabase(deps, ctx, (db) =>
        db
          .update(storageGrants)
          .set({ deletedAt: now })
          .where(
            and(
              eq(storageGrants.id, grantId),
              eq(storageGrants.tenantId, tenantId),
              isNull(storageGrants.deletedAt),
            ),
          ),
      );
    } else if (version.size > 0) {
      const used = await getCurrentUsage(deps, ctx, { feature: "storage_bytes", period: "never" });
      const quantity = Math.min(version.size, Math.max(used, 0));
      if (quantity > 0)
        await recordUsage(deps, ctx, {
          feature: "storage_bytes",
          quantity: -quantity,
          idempotencyKey: `storage_bytes:delete:${createHash("sha256").update(`${tenantId}\u0000${input.key}\u0000${version.version}`).digest("hex")}`,
        });
    }
  }
  await settleStorageRefunds(deps, ctx);
}
