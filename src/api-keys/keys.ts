import { and, eq, isNull, sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { endSessions } from "../auth/sessions.ts";
import { requireRecentSecondFactor } from "../auth/step-up.ts";
import { assertFeature } from "../billing/entitlements.ts";
import { isFresh, isoOrNull } from "../clock.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import { creationOrder } from "../db/keyset.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { apiKeys, tenants } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError, validationFailed } from "../errors.ts";
import { createdAtPosition, cursorCodec, type Page, pageOf } from "../pagination.ts";
import { isUuid } from "../tenancy/tenants.ts";
import { recordUsage } from "../usage/record-usage.ts";
import { apiKeyHash, newApiKey, newPrefix } from "./format.ts";
import { apiKeyScopes } from "./scopes.ts";

/**
 * A tenant's API keys (docs/api-keys.md): created, listed, rolled and revoked by the tenant's owners
 * and admins. Each change is one function and one transaction, so its audit row joins it there.
 */

export type ApiKeyDeps = Pick<Deps, "database" | "cache" | "clock" | "logger" | "config" | "sessionCache">;

/** The longest grace a roll gives the replaced key, and the default (24 h). */
export const MAX_GRACE_SECONDS = 30 * 86_400;
export const DEFAULT_GRACE_SECONDS = 86_400;
/** `last_used_at` moves at most this often per key. */
export const LAST_USE_INTERVAL_MS = 60_000;

export const newApiKeySchema = z.object({
  name: z.string().trim().min(1).max(100),
  scopes: z
    .array(z.enum(apiKeyScopes))
    .min(1)
    .max(apiKeyScopes.length)
    .refine((scopes) => new Set(scopes).size === scopes.length, "each scope once"),
  expiresAt: z.iso.datetime({ offset: true }).optional(),
});
export type NewApiKey = z.input<typeof newApiKeySchema>;

export interface ApiKeyView {
  id: string;
  name: string;
  scopes: string[];
  /** `plk_` and the id part: how to recognise the key (never enough to use it). */
  prefix: string;
  /** The user who created it; null once that user is removed (the key stays). */
  createdBy: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  /** The client address of that use. */
  lastUsedIp: string | null;
  expiresAt: string | null;
  rolledAt: string | null;
  /** Until when the secret a roll replaced still works; null when none does. */
  previousKeyExpiresAt: string | null;
  revokedAt: string | null;
  status: "active" | "expired" | "revoked";
}

type ApiKeyRow = typeof apiKeys.$inferSelect;

function view(row: ApiKeyRow, now: Date): ApiKeyView {
  const graceRuns = row.previousExpiresAt !== null && row.previousExpiresAt > now;
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    prefix: row.prefix,
    createdBy: row.createdBy,
    createdAt: row.createdAt.toISOString(),
    lastUsedAt: isoOrNull(row.lastUsedAt),
    lastUsedIp: row.lastUsedIp,
    expiresAt: isoOrNull(row.expiresAt),
    rolledAt: isoOrNull(row.rolledAt),
    previousKeyExpiresAt: graceRuns ? isoOrNull(row.previousExpiresAt) : null,
    revokedAt: isoOrNull(row.revokedAt),
    status: row.revokedAt ? "revoked" : row.expiresAt && row.expiresAt <= now ? "expired" : "active",
  };
}

/** Keys are managed by tenant users (owners, admins), never by a key. */
function assertUser(ctx: TenantCtx): string | null {
  if (ctx.actor.type === "apiKey") throw new AppError("forbidden", "API keys cannot manage API keys.");
  return ctx.actor.type === "user" ? ctx.actor.userId : null;
}

const notFound = () => new AppError("not_found", "No such API key.");

/**
 * `api_keys` usage (all-time): +1 per key created, −1 per key revoked, keyed by the key's id so a
 * retried call never counts twice; recorded last in the transaction of the change.
 */
async function countKey(deps: ApiKeyDeps, ctx: TenantCtx & { tx: Tx }, keyId: string, quantity: 1 | -1) {
  await recordUsage(deps, ctx, {
    feature: "api_keys",
    quantity,
    idempotencyKey: `api_keys:${quantity > 0 ? "created" : "revoked"}:${keyId}`,
  });
}

/**
 * Creates a key for the ctx's tenant and returns it with the key itself, which is never shown
 * again (only its SHA-256 is stored). Held to the plan's `api_keys` feature: 402 when the plan has
 * none, 403 `usage_limit_reached` when the tenant's keys not revoked reach the limit (counted under
 * the tenant's row lock, so concurrent creations cannot pass it). One transaction.
 */
export async function createApiKey(
  deps: ApiKeyDeps,
  ctx: TenantCtx,
  input: NewApiKey,
): Promise<ApiKeyView & { key: string }> {
  const createdBy = assertUser(ctx);
  await requireRecentSecondFactor(deps, ctx);
  const parsed = newApiKeySchema.parse(input);
  const now = deps.clock.now();
  const expiresAt = parsed.expiresAt === undefined ? null : new Date(parsed.expiresAt);
  if (expiresAt && expiresAt <= now)
    throw validationFailed([{ path: "expiresAt", message: "must be in the future" }]);
  const { tenantId } = ctx;
  const { limit } = await assertFeature(deps, ctx, { feature: "api_keys" });
  return withTransaction(deps, ctx, async (tx, ctx) => {
    const [tenant] = await tx
      .select({ id: tenants.id })
      .from(tenants)
      .where(eq(tenants.id, tenantId))
      .for("update");
    if (!tenant) throw new AppError("not_found", "No such tenant.");
    if (limit !== null) {
      const [held] = await tx
        .select({ n: sql<number>`count(*)::int` })
        .from(apiKeys)
        .where(and(eq(apiKeys.tenantId, tenantId), isNull(apiKeys.revokedAt)));
      if ((held?.n ?? 0) >= limit)
        throw new AppError(
          "usage_limit_reached",
          `The limit of "api_keys" (${limit} keys) is reached: revoke a key to make room.`,
        );
    }
    // the id part is random (71 bits); a clash with another key's is retried with a new one
    for (let attempt = 0; attempt < 3; attempt++) {
      const prefix = newPrefix();
      const key = newApiKey(prefix);
      const [row] = await tx
        .insert(apiKeys)
        .values({
          tenantId,
          name: parsed.name,
          scopes: parsed.scopes,
          prefix,
          secretHash: apiKeyHash(key),
          createdBy,
          createdAt: now,
          expiresAt,
        })
        .onConflictDoNothing({ target: apiKeys.prefix })
        .returning();
      if (!row) continue;
      await countKey(deps, { ...ctx, tx }, row.id, 1);
      await recordAudit(tx, ctx, {
        action: "api_key.created",
        target: { type: "api_key", id: row.id },
        details: { name: row.name, scopes: row.scopes, prefix, expiresAt },
      });
      return { ...view(row, now), key };
    }
    throw new Error("could not find a free API key id part");
  });
}

/** Where a page of keys ends: the last key's creation time (PostgreSQL's exact text) and id. */
export const apiKeyCursor = cursorCodec(createdAtPosition);

/** A page of the ctx's tenant's keys (revoked ones too) in creation order; never a key or a hash. */
export async function listApiKeys(
  deps: ApiKeyDeps,
  ctx: TenantCtx,
  input: { limit: number; cursor?: string },
): Promise<Page<ApiKeyView>> {
  assertUser(ctx);
  const after = apiKeyCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(apiKeys, "asc", after);
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select({ row: apiKeys, position: keyset.position })
      .from(apiKeys)
      .where(and(eq(apiKeys.tenantId, ctx.tenantId), keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  const now = deps.clock.now();
  return pageOf(
    rows,
    input.limit,
    ({ row }) => view(row, now),
    ({ row, position }) => ({ createdAt: position, id: row.id }),
    apiKeyCursor,
  );
}

async function lockKey(tx: Executor, ctx: TenantCtx, id: string): Promise<ApiKeyRow> {
  if (!isUuid(id)) throw notFound();
  const [row] = await tx
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.id, id), eq(apiKeys.tenantId, ctx.tenantId)))
    .for("update");
  if (!row) throw notFound();
  return row;
}

/**
 * Revokes a key of the ctx's tenant at once: its row, its −1 of `api_keys` usage, and the notice
 * that drops it from every process's cache as the transaction commits (docs/api-keys.md). Revoking
 * a revoked key changes nothing; another tenant's key is 404.
 */
export async function revokeApiKey(deps: ApiKeyDeps, ctx: TenantCtx, input: { id: string }): Promise<void> {
  assertUser(ctx);
  const now = deps.clock.now();
  await withTransaction(deps, ctx, async (tx, ctx) => {
    const row = await lockKey(tx, ctx, input.id);
    if (row.revokedAt) return;
    await tx
      .update(apiKeys)
      .set({ revokedAt: now, previousSecretHash: null, previousExpiresAt: null })
      .where(eq(apiKeys.id, row.id));
    await endSessions(deps, ctx, { apiKeyId: row.id });
    await countKey(deps, ctx, row.id, -1);
    await recordAudit(tx, ctx, {
      action: "api_key.revoked",
      target: { type: "api_key", id: row.id },
      details: { name: row.name, prefix: row.prefix },
    });
  });
}

/**
 * Gives a key of the ctx's tenant a new secret (same id part, name, scopes and expiry) and returns
 * the new key, shown only here. The replaced secret keeps working for `gracePeriodSeconds`
 * (default 24 h; 0 ends it at once); a secret replaced by an earlier roll stops now. 409 for a
 * revoked or expired key.
 */
export async function rollApiKey(
  deps: ApiKeyDeps,
  ctx: TenantCtx,
  input: { id: string; gracePeriodSeconds?: number },
): Promise<ApiKeyView & { key: string }> {
  assertUser(ctx);
  const grace = input.gracePeriodSeconds ?? DEFAULT_GRACE_SECONDS;
  if (!Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS)
    throw validationFailed([{ path: "gracePeriodSeconds", message: `0 to ${MAX_GRACE_SECONDS}` }]);
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx, ctx) => {
    const row = await lockKey(tx, ctx, input.id);
    if (row.revokedAt) throw new AppError("conflict", "The API key is revoked.");
    if (row.expiresAt && row.expiresAt <= now) throw new AppError("conflict", "The API key has expired.");
    const key = newApiKey(row.prefix);
    const [rolled] = await tx
      .update(apiKeys)
      .set({
        secretHash: apiKeyHash(key),
        previousSecretHash: grace > 0 ? row.secretHash : null,
        previousExpiresAt: grace > 0 ? new Date(now.getTime() + grace * 1000) : null,
        rolledAt: now,
      })
      .where(eq(apiKeys.id, row.id))
      .returning();
    if (!rolled) throw notFound();
    await endSessions(deps, ctx, { apiKeyId: row.id });
    await recordAudit(tx, ctx, {
      action: "api_key.rolled",
      target: { type: "api_key", id: row.id },
      details: { name: row.name, prefix: row.prefix, graceSeconds: grace },
    });
    return { ...view(rolled, now), key };
  });
}

/**
 * Records that a key was used now from `ctx.clientIp`, unless its last use was recorded less than
 * a minute ago (by any process): at most one write per key and minute. A stored use more than
 * `CLOCK_STEP_BACK_MS` ahead of now was stamped by a clock since put back and is replaced (`isFresh`).
 * `firstUse` says whether the key had never been used. One transaction.
 */
export async function markApiKeyUsed(
  deps: Pick<Deps, "database" | "clock">,
  ctx: TenantCtx,
  input: { keyId: string },
): Promise<{ firstUse: boolean } | null> {
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx) => {
    const [row] = await tx
      .select({ lastUsedAt: apiKeys.lastUsedAt })
      .from(apiKeys)
      .where(and(eq(apiKeys.id, input.keyId), eq(apiKeys.tenantId, ctx.tenantId)))
      .for("update");
    if (!row) return null;
    if (row.lastUsedAt && isFresh(row.lastUsedAt.getTime(), LAST_USE_INTERVAL_MS, now.getTime())) return null;
    await tx
      .update(apiKeys)
      .set({ lastUsedAt: now, lastUsedIp: ctx.clientIp ?? null })
      .where(eq(apiKeys.id, input.keyId));
    if (row.lastUsedAt === null)
      await recordAudit(tx, ctx, {
        action: "api_key.first_used",
        target: { type: "api_key", id: input.keyId },
      });
    return { firstUse: row.lastUsedAt === null };
  });
}
