import { and, eq, getTableColumns, gt, isNull, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { opaqueToken, tokenHash } from "../auth/opaque-tokens.ts";
import { assertFeature } from "../billing/entitlements.ts";
import { isoOrNull } from "../clock.ts";
import { actorUserId, type TenantCtx } from "../context.ts";
import { creationOrder } from "../db/keyset.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { ssoSetupLinks, tenants } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { publicBaseUrl } from "../email/links.ts";
import { AppError } from "../errors.ts";
import { createdAtPosition, cursorCodec, type Page, pageByCreation } from "../pagination.ts";
import { getTenant, isUuid } from "../tenancy/tenants.ts";

/**
 * Set-up links (docs/sso.md "Hand an owner a set-up link"): a platform admin makes one for a tenant
 * and hands it to an owner; it grants nothing by itself. Opened by an owner of that tenant signed in
 * to the console, it leads to the tenant's SSO page and records that it was opened. The token is 256
 * random bits shown once in the link; only its SHA-256 is kept, and it is looked up by that hash.
 */

export type SetupLinkDeps = Pick<Deps, "database" | "cache" | "clock" | "logger" | "config">;

/** How long a link works unless the admin asks otherwise, and the most it may. */
export const SETUP_LINK_DEFAULT_HOURS = 72;
export const SETUP_LINK_MAX_HOURS = 168;

/** The console page a link opens; the token rides in its query (request logs hold the path only), kept through the console sign-in. */
export const SETUP_LINK_PATH = "/console/sso/setup";

export interface SsoSetupLinkView {
  id: string;
  createdAt: string;
  /** The platform admin who made it. */
  createdBy: string | null;
  expiresAt: string;
  /** The first time an owner of the tenant opened it. */
  openedAt: string | null;
  revokedAt: string | null;
}

type SetupLinkRow = typeof ssoSetupLinks.$inferSelect;

const view = (row: Omit<SetupLinkRow, "tokenHash">): SsoSetupLinkView => ({
  id: row.id,
  createdAt: row.createdAt.toISOString(),
  createdBy: row.createdBy,
  expiresAt: row.expiresAt.toISOString(),
  openedAt: isoOrNull(row.openedAt),
  revokedAt: isoOrNull(row.revokedAt),
});

/** Every column but the token's hash, which never leaves this module. */
const { tokenHash: _tokenHash, ...listedColumns } = getTableColumns(ssoSetupLinks);

const noSuchTenant = () => new AppError("not_found", "No such tenant.");

/**
 * Makes a set-up link for the ctx's tenant (a platform admin's ctx in the tenant the route names):
 * `{ id, url, expiresAt }`, the url shown this once. 404 for an unknown tenant; 402 when its plan has
 * no `sso`, as every other part of enterprise sign-in; 400 beyond `SETUP_LINK_MAX_HOURS`.
 */
export async function createSsoSetupLink(
  deps: SetupLinkDeps,
  ctx: TenantCtx,
  input: { expiresInHours?: number | undefined },
): Promise<{ id: string; url: string; expiresAt: string }> {
  const hours = input.expiresInHours ?? SETUP_LINK_DEFAULT_HOURS;
  if (!Number.isInteger(hours) || hours < 1 || hours > SETUP_LINK_MAX_HOURS)
    throw new AppError("validation_failed", "The request is not valid.", {
      fields: [
        { path: "expiresInHours", message: `a whole number of hours from 1 to ${SETUP_LINK_MAX_HOURS}` },
      ],
    });
  const tenant = await getTenant(deps, ctx, { tenantId: ctx.tenantId }); // 404 for an unknown tenant
  await assertFeature(deps, ctx, { feature: "sso" });
  const token = opaqueToken(32);
  const now = deps.clock.now();
  const expiresAt = new Date(now.getTime() + hours * 3_600_000);
  return withTransaction(deps, ctx, async (tx, ctx) => {
    const [row] = await tx
      .insert(ssoSetupLinks)
      .values({
        tenantId: tenant.id,
        tokenHash: tokenHash(token),
        createdBy: actorUserId(ctx),
        createdAt: now,
        expiresAt,
      })
      .returning({ id: ssoSetupLinks.id });
    if (!row) throw new Error("the set-up link was not stored");
    await recordAudit(tx, ctx, {
      action: "sso_setup_link.created",
      target: { type: "sso_setup_link", id: row.id },
      details: { expiresAt: expiresAt.toISOString(), expiresInHours: hours },
    });
    return {
      id: row.id,
      url: `${publicBaseUrl(deps.config.settings)}${SETUP_LINK_PATH}?token=${token}`,
      expiresAt: expiresAt.toISOString(),
    };
  });
}

export const setupLinkCursor = cursorCodec(createdAtPosition);

/** A page of the ctx tenant's set-up links, newest first, every state; never a token or its hash. */
export async function listSsoSetupLinks(
  deps: SetupLinkDeps,
  ctx: TenantCtx,
  input: { limit: number; cursor?: string | undefined },
): Promise<Page<SsoSetupLinkView>> {
  if (!isUuid(ctx.tenantId)) throw noSuchTenant();
  const after = setupLinkCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(ssoSetupLinks, "desc", after);
  const { tenant, rows } = await withDatabase(deps, ctx, async (db) => {
    const [tenant] = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, ctx.tenantId));
    const rows = await db
      .select({ ...listedColumns, position: keyset.position })
      .from(ssoSetupLinks)
      .where(and(eq(ssoSetupLinks.tenantId, ctx.tenantId), keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1);
    return { tenant, rows };
  });
  if (!tenant) throw noSuchTenant();
  return pageByCreation(rows, input.limit, view, setupLinkCursor);
}

/** Revokes a link of the ctx's tenant not revoked yet; another tenant's, or one revoked already, is 404. */
export async function revokeSsoSetupLink(
  deps: SetupLinkDeps,
  ctx: TenantCtx,
  input: { linkId: string },
): Promise<void> {
  const notFound = () => new AppError("not_found", "No such set-up link.");
  if (!isUuid(ctx.tenantId) || !isUuid(input.linkId)) throw notFound();
  await withTransaction(deps, ctx, async (tx, ctx) => {
    const [row] = await tx
      .update(ssoSetupLinks)
      .set({ revokedAt: deps.clock.now() })
      .where(
        and(
          eq(ssoSetupLinks.id, input.linkId),
          eq(ssoSetupLinks.tenantId, ctx.tenantId),
          isNull(ssoSetupLinks.revokedAt),
        ),
      )
      .returning({ id: ssoSetupLinks.id, expiresAt: ssoSetupLinks.expiresAt });
    if (!row) throw notFound();
    await recordAudit(tx, ctx, {
      action: "sso_setup_link.revoked",
      target: { type: "sso_setup_link", id: row.id },
      details: { expiresAt: row.expiresAt.toISOString() },
    });
  });
}

/**
 * An owner of the ctx's tenant (signed in to the console in that tenant) opens a link: its first
 * opening is recorded (`openedAt`, `openedBy`), each is audited. Anyone else (another role, another
 * tenant's owner), an unknown, expired or revoked token: the same 404, whatever the reason.
 */
export async function openSsoSetupLink(
  deps: SetupLinkDeps,
  ctx: TenantCtx,
  input: { token: string },
): Promise<{ id: string }> {
  const notFound = () => new AppError("not_found", "No such set-up link.");
  const userId = actorUserId(ctx);
  const owner = ctx.actor.type === "user" && ctx.actor.roles.includes("owner");
  if (!owner || !userId || !/^[A-Za-z0-9_-]{43}$/.test(input.token)) throw notFound();
  const now = deps.clock.now();
  return withTransaction(deps, ctx, async (tx, ctx) => {
    // by its unguessable hash, in the owner's own tenant only: another tenant's link is not found
    const [row] = await tx
      .update(ssoSetupLinks)
      .set({
        openedAt: sql`coalesce(${ssoSetupLinks.openedAt}, ${now.toISOString()}::timestamptz)`,
        openedBy: sql`coalesce(${ssoSetupLinks.openedBy}, ${userId}::uuid)`,
      })
      .where(
        and(
          eq(ssoSetupLinks.tokenHash, tokenHash(input.token)),
          eq(ssoSetupLinks.tenantId, ctx.tenantId),
          isNull(ssoSetupLinks.revokedAt),
          gt(ssoSetupLinks.expiresAt, now),
        ),
      )
      .returning({ id: ssoSetupLinks.id, openedAt: ssoSetupLinks.openedAt });
    if (!row) throw notFound();
    await recordAudit(tx, ctx, {
      action: "sso_setup_link.opened",
      target: { type: "sso_setup_link", id: row.id },
      details: { first: row.openedAt?.getTime() === now.getTime() },
    });
    return { id: row.id };
  });
}
