import { and, eq, gt, isNull } from "drizzle-orm";
import type { Clock } from "../clock.ts";
import type { Ctx } from "../context.ts";
import { type DatabaseDeps, withTenantOrPlatformDatabase } from "../db/operation.ts";
import { type SingleUseTokenPurpose, singleUseTokens } from "../db/schema/single-use-tokens.ts";
import { opaqueToken, tokenHash } from "./opaque-tokens.ts";

export type { SingleUseTokenPurpose };

export interface SingleUseTokenDeps extends DatabaseDeps {
  clock: Clock;
}

export interface IssueSingleUseTokenInput {
  purpose: SingleUseTokenPurpose;
  /** null for platform staff. */
  tenantId: string | null;
  userId?: string | null;
  /** What the token is about besides the user: the address to verify, an invitation id. */
  subject?: string | null;
  /** How long the token is valid, from the injected clock's now. */
  lifetimeSeconds: number;
  /**
   * Spend the user's other open tokens of this purpose first (a second reset e-mail makes the
   * first link useless). Needs `userId`.
   */
  replacePrevious?: boolean;
}

export interface IssuedSingleUseToken {
  id: string;
  /** The token itself: goes into the one link that carries it, never into a log or a table. */
  token: string;
  expiresAt: Date;
}

/** What a consumed token was issued for. */
export interface ConsumedSingleUseToken {
  id: string;
  tenantId: string | null;
  userId: string | null;
  subject: string | null;
  createdAt: Date;
}

/** A user's tokens of `purpose` not spent yet. */
const openTokensOf = (userId: string, purpose: SingleUseTokenPurpose) =>
  and(
    eq(singleUseTokens.userId, userId),
    eq(singleUseTokens.purpose, purpose),
    isNull(singleUseTokens.usedAt),
  );

/**
 * Issues a one-time token (256 random bits, base64url) bound to `purpose`: stored only as its
 * SHA-256, valid `lifetimeSeconds`. Runs in the ctx's transaction when it has one, so the token
 * and the e-mail that carries it (`enqueueEmail`) commit together or not at all. In the ctx tenant's
 * context, or on the platform path for a ctx without one (platform staff's tokens).
 */
export async function issueSingleUseToken(
  deps: SingleUseTokenDeps,
  ctx: Ctx,
  input: IssueSingleUseTokenInput,
): Promise<IssuedSingleUseToken> {
  const now = deps.clock.now();
  const expiresAt = new Date(now.getTime() + input.lifetimeSeconds * 1000);
  const token = opaqueToken(32);
  return withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, async (db) => {
    if (input.replacePrevious && input.userId)
      await db.update(singleUseTokens).set({ usedAt: now }).where(openTokensOf(input.userId, input.purpose));
    const [row] = await db
      .insert(singleUseTokens)
      .values({
        tenantId: input.tenantId,
        userId: input.userId ?? null,
        purpose: input.purpose,
        subject: input.subject ?? null,
        tokenHash: tokenHash(token),
        createdAt: now,
        expiresAt,
      })
      .returning({ id: singleUseTokens.id });
    if (!row) throw new Error("the single-use token insert returned no row");
    return { id: row.id, token, expiresAt };
  });
}

/**
 * Consumes a token of `purpose` in one conditional update (`used_at is null and expires_at > now`,
 * by hash): of two concurrent uses exactly one gets the row. Null for an unknown, spent, expired
 * or other-purpose token — the caller answers all of them alike. `tenantId` (when given) must match
 * too: a token of tenant A is unknown on tenant B's host. With a ctx without a tenant (the platform
 * host, where the token itself names its tenant) it is a named platform lookup.
 */
export async function consumeSingleUseToken(
  deps: SingleUseTokenDeps,
  ctx: Ctx,
  input: { purpose: SingleUseTokenPurpose; token: string; tenantId?: string | null },
): Promise<ConsumedSingleUseToken | null> {
  const now = deps.clock.now();
  const [row] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .update(singleUseTokens)
      .set({ usedAt: now })
      .where(
        and(
          eq(singleUseTokens.tokenHash, tokenHash(input.token)),
          eq(singleUseTokens.purpose, input.purpose),
          isNull(singleUseTokens.usedAt),
          gt(singleUseTokens.expiresAt, now),
          input.tenantId === undefined
            ? undefined
            : input.tenantId === null
              ? isNull(singleUseTokens.tenantId)
              : eq(singleUseTokens.tenantId, input.tenantId),
        ),
      )
      .returning({
        id: singleUseTokens.id,
        tenantId: singleUseTokens.tenantId,
        userId: singleUseTokens.userId,
        subject: singleUseTokens.subject,
        createdAt: singleUseTokens.createdAt,
      }),
  );
  return row ?? null;
}

/** Spends every open token of `purpose` of a user (e.g. after their password changed). */
export async function revokeSingleUseTokens(
  deps: SingleUseTokenDeps,
  ctx: Ctx,
  input: { purpose: SingleUseTokenPurpose; userId: string },
): Promise<number> {
  const now = deps.clock.now();
  const rows = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .update(singleUseTokens)
      .set({ usedAt: now })
      .where(openTokensOf(input.userId, input.purpose))
      .returning({ id: singleUseTokens.id }),
  );
  return rows.length;
}
