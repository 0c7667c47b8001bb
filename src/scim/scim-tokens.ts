import { createHash, randomInt, timingSafeEqual } from "node:crypto";
import { and, eq, gt, isNull, lte, or, sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { requireRecentSecondFactor } from "../auth/step-up.ts";
import { assertFeature } from "../billing/entitlements.ts";
import { CLOCK_STEP_BACK_MS, isoOrNull } from "../clock.ts";
import { systemCtx, type TenantCtx } from "../context.ts";
import { creationOrder } from "../db/keyset.ts";
import { withDatabase, withPlatformDatabase, withTransaction } from "../db/operation.ts";
import { scimTokens, tenants } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { createdAtPosition, cursorCodec, type Page, pageOf } from "../pagination.ts";
import { isUuid } from "../tenancy/tenants.ts";

/**
 * A tenant's SCIM bearer tokens (docs/scim.md): `plscim_` + a 12-character id part + `_` + a
 * 32-character secret part (base62, ≈190 bits). Only the SHA-256 of the whole token is stored (the
 * token is random: nothing to stretch); `plscim_` and the id part are its `prefix`, shown in lists.
 * Rotating is creating a new token and deleting the old one once the directory uses the new one.
 */

export type ScimTokenDeps = Pick<Deps, "database" | "cache" | "clock" | "logger" | "config">;

const PREFIX = "plscim_";
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const TOKEN = /^(plscim_[0-9A-Za-z]{12})_[0-9A-Za-z]{32}$/;

function base62(length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) out += BASE62[randomInt(62)];
  return out;
}

const digestOf = (token: string): Buffer => createHash("sha256").update(token).digest();

export const newScimTokenSchema = z.object({
  name: z.string().trim().min(1).max(100).default("SCIM"),
});
export type NewScimToken = z.input<typeof newScimTokenSchema>;

export interface ScimTokenView {
  id: string;
  name: string;
  /** `plscim_` and the id part: recognises the token, cannot use it. */
  prefix: string;
  createdBy: string | null;
  createdAt: string;
  lastUsedAt: string | null;
}

type ScimTokenRow = typeof scimTokens.$inferSelect;

const view = (row: ScimTokenRow): ScimTokenView => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  createdBy: row.createdBy,
  createdAt: row.createdAt.toISOString(),
  lastUsedAt: isoOrNull(row.lastUsedAt),
});

/** Tokens are managed by the tenant's owners, signed in (never by an API key). */
function creatorOf(ctx: TenantCtx): string | null {
  if (ctx.actor.type === "apiKey") throw new AppError("forbidden", "API keys cannot manage SCIM tokens.");
  return ctx.actor.type === "user" ? ctx.actor.userId : null;
}

/**
 * Creates a SCIM token for the ctx's tenant and returns it with the token itself, shown this once.
 * Held to the plan's `sso` feature (402 without it), as the rest of enterprise sign-in is.
 */
export async function createScimToken(
  deps: ScimTokenDeps,
  ctx: TenantCtx,
  input: NewScimToken,
): Promise<ScimTokenView & { token: string }> {
  const createdBy = creatorOf(ctx);
  const { name } = newScimTokenSchema.parse(input);
  await requireRecentSecondFactor(deps, ctx);
  await assertFeature(deps, ctx, { feature: "sso" });
  return withTransaction(deps, ctx, async (tx, ctx) => {
    const [tenant] = await tx.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, ctx.tenantId));
    if (!tenant) throw new AppError("not_found", "No such tenant.");
    const prefix = `${PREFIX}${base62(12)}`;
    const token = `${prefix}_${base62(32)}`;
    const [row] = await tx
      .insert(scimTokens)
      .values({
        tenantId: ctx.tenantId,
        name,
        prefix,
        secretHash: digestOf(token).toString("hex"),
        createdBy,
        createdAt: deps.clock.now(),
      })
      .returning();
    if (!row) throw new Error("the SCIM token was not stored");
    await recordAudit(tx, ctx, {
      action: "scim_token.created",
      target: { type: "scim_token", id: row.id },
      details: { name, prefix },
    });
    return { ...view(row), token };
  });
}

const tokenCursor = cursorCodec(createdAtPosition);

/** A page of the ctx tenant's tokens not deleted, in creation order; never a token or its hash. */
export async function listScimTokens(
  deps: ScimTokenDeps,
  ctx: TenantCtx,
  input: { limit: number; cursor?: string },
): Promise<Page<ScimTokenView>> {
  creatorOf(ctx);
  const after = tokenCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(scimTokens, "asc", after);
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select({ row: scimTokens, position: keyset.position })
      .from(scimTokens)
      .where(and(eq(scimTokens.tenantId, ctx.tenantId), sql`${scimTokens.revokedAt} is null`, keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    ({ row }) => view(row),
    ({ row, position }) => ({ createdAt: position, id: row.id }),
    tokenCursor,
  );
}

/** Deletes (revokes) a token of the ctx's tenant: refused from the next request on; another tenant's is 404. */
export async function deleteScimToken(
  deps: ScimTokenDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<void> {
  creatorOf(ctx);
  await requireRecentSecondFactor(deps, ctx);
  const notFound = () => new AppError("not_found", "No such SCIM token.");
  if (!isUuid(input.id)) throw notFound();
  await withTransaction(deps, ctx, async (tx, ctx) => {
    const [row] = await tx
      .update(scimTokens)
      .set({ revokedAt: deps.clock.now() })
      .where(
        and(
          eq(scimTokens.id, input.id),
          eq(scimTokens.tenantId, ctx.tenantId),
          sql`${scimTokens.revokedAt} is null`,
        ),
      )
      .returning();
    if (!row) throw notFound();
    await recordAudit(tx, ctx, {
      action: "scim_token.revoked",
      target: { type: "scim_token", id: row.id },
      details: { name: row.name, prefix: row.prefix },
    });
  });
}

/** What a checked SCIM token stands for. */
export interface OpenScimToken {
  tokenId: string;
  tenantId: string;
}

/** Compared with a presented token whose prefix is unknown, so both cost the same. */
const UNKNOWN_HASH = digestOf(`${PREFIX}${base62(12)}_${base62(32)}`).toString("hex");

const SCIM_TOKEN_LOOKUP = systemCtx("scim token lookup");

/**
 * The tenant a presented SCIM token belongs to, or null (unknown, revoked, of a tenant not Active):
 * the secret is compared in constant time with the stored SHA-256 before anything else is told. Read
 * from the database on every request, so a deleted token is refused at once on every process.
 */
export async function openScimToken(
  deps: Pick<Deps, "database" | "clock">,
  presented: string,
): Promise<OpenScimToken | null> {
  const prefix = TOKEN.exec(presented)?.[1];
  if (!prefix) return null;
  // a platform lookup: the token's own row names its tenant (as the API keys' lookup)
  const [row] = await withPlatformDatabase(deps, SCIM_TOKEN_LOOKUP, (db) =>
    db
      .select({
        id: scimTokens.id,
        tenantId: scimTokens.tenantId,
        secretHash: scimTokens.secretHash,
        revokedAt: scimTokens.revokedAt,
        tenantStatus: tenants.status,
      })
      .from(scimTokens)
      .innerJoin(tenants, eq(tenants.id, scimTokens.tenantId))
      .where(eq(scimTokens.prefix, prefix))
      .limit(1),
  );
  const matches = timingSafeEqual(digestOf(presented), Buffer.from(row?.secretHash ?? UNKNOWN_HASH, "hex"));
  if (!row || !matches || row.revokedAt !== null || row.tenantStatus !== "Active") return null;
  return { tokenId: row.id, tenantId: row.tenantId };
}

/** `last_used_at` moves at most this often per token. */
const LAST_USE_INTERVAL_MS = 60_000;

/**
 * Records a token's last use at most once a minute (the row is left as it is otherwise). A stored use
 * more than `CLOCK_STEP_BACK_MS` ahead of now was stamped by a clock since put back and is replaced,
 * as `isFresh` judges (src/clock.ts), in the statement's condition.
 */
export async function markScimTokenUsed(
  deps: Pick<Deps, "database" | "clock">,
  ctx: TenantCtx,
  input: { tokenId: string },
): Promise<void> {
  const now = deps.clock.now();
  await withTransaction(deps, ctx, (tx) =>
    tx
      .update(scimTokens)
      .set({ lastUsedAt: now })
      .where(
        and(
          eq(scimTokens.id, input.tokenId),
          or(
            isNull(scimTokens.lastUsedAt),
            lte(scimTokens.lastUsedAt, new Date(now.getTime() - LAST_USE_INTERVAL_MS)),
            gt(scimTokens.lastUsedAt, new Date(now.getTime() + CLOCK_STEP_BACK_MS)),
          ),
        ),
      ),
  );
}
