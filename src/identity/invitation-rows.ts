import { and, eq, gt, isNull, sql } from "drizzle-orm";
import { issueSingleUseToken } from "../auth/single-use-tokens.ts";
import type { BillingDeps } from "../billing/billing-deps.ts";
import { cachedTenantFeatures } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import { singleUseTokens, tenantInvitations, tenantMemberships, tenants, users } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { enqueueEmail } from "../email/enqueue-email.ts";
import { EMAIL_LINK_PATHS, emailLink } from "../email/links.ts";
import { AppError } from "../errors.ts";
import { mayChangePlatform } from "./roles.ts";

/** What the invitation operations need: the plan (seats), the outboxes (events, e-mail), the clock. */
export type InvitationDeps = Deps;

/** How long an invitation's link works (a resend starts it again). */
export const INVITATION_DAYS = 7;

export interface InvitationView {
  id: string;
  email: string;
  role: string;
  /**
   * `expired`: pending past `expiresAt` (a resend revives it). Lower case in the contract, as every
   * state but the spec's tenant, user and domain states (docs/api-conventions.md); the stored value
   * is PascalCase.
   */
  status: "pending" | "accepted" | "revoked" | "expired";
  expiresAt: string;
  invitedBy: string | null;
  createdAt: string;
}

export const invitationColumns = {
  id: tenantInvitations.id,
  email: tenantInvitations.email,
  role: tenantInvitations.role,
  status: tenantInvitations.status,
  expiresAt: tenantInvitations.expiresAt,
  invitedBy: tenantInvitations.invitedBy,
  createdAt: tenantInvitations.createdAt,
};

type InvitationRow = {
  id: string;
  email: string;
  role: string;
  status: "Pending" | "Accepted" | "Revoked";
  expiresAt: Date;
  invitedBy: string | null;
  createdAt: Date;
};

const STATUS_VIEW = { Pending: "pending", Accepted: "accepted", Revoked: "revoked" } as const;

export function invitationView(row: InvitationRow, now: Date): InvitationView {
  return {
    ...row,
    status: row.status === "Pending" && row.expiresAt <= now ? "expired" : STATUS_VIEW[row.status],
    expiresAt: row.expiresAt.toISOString(),
    createdAt: row.createdAt.toISOString(),
  };
}

/**
 * Issues the invitation's link (a single-use token of purpose `invitation` whose subject is the
 * invitation, valid until it expires), spending any earlier link of it, and mails it in the ctx's
 * transaction (the e-mail outbox): the message is sent if and only if the change commits.
 */
export async function mailInvitation(
  deps: InvitationDeps,
  ctx: TenantCtx & { tx: Tx },
  input: { invitationId: string; email: string; role: string; expiresAt: Date },
): Promise<void> {
  const now = deps.clock.now();
  await ctx.tx
    .update(singleUseTokens)
    .set({ usedAt: now })
    .where(
      and(
        eq(singleUseTokens.purpose, "invitation"),
        eq(singleUseTokens.subject, input.invitationId),
        isNull(singleUseTokens.usedAt),
      ),
    );
  const lifetimeSeconds = Math.max(1, Math.round((input.expiresAt.getTime() - now.getTime()) / 1000));
  const issued = await issueSingleUseToken(deps, ctx, {
    purpose: "invitation",
    tenantId: ctx.tenantId,
    subject: input.invitationId,
    lifetimeSeconds,
  });
  await enqueueEmail(deps, ctx, {
    tenantId: ctx.tenantId,
    to: input.email,
    template: "invitation",
    data: {
      inviterName: await inviterName(ctx),
      role: input.role,
      link: emailLink(deps.config.settings, EMAIL_LINK_PATHS.invitation, issued.token),
      expiresInMinutes: Math.round(lifetimeSeconds / 60),
    },
  });
}

/** Who invites, as the message names them: the inviting user's name (or address), else the tenant. */
async function inviterName(ctx: TenantCtx & { tx: Tx }): Promise<string> {
  if (ctx.actor.type !== "user") return "An administrator";
  const [row] = await ctx.tx
    .select({ name: users.name, email: users.email })
    .from(users)
    .where(eq(users.id, ctx.actor.userId));
  return row?.name || row?.email || "An administrator";
}

/** When an invitation issued now expires. */
export const invitationExpiry = (now: Date) => new Date(now.getTime() + INVITATION_DAYS * 86_400_000);

export const noSuchInvitation = () => new AppError("not_found", "No such invitation.");

/**
 * Whether the ctx's actor is held to the tenant's plan: its own users and keys are; a platform
 * administrator and Plinth itself are not (as for custom domains).
 */
export function heldToPlan(ctx: TenantCtx): boolean {
  if (ctx.actor.type === "user") return !mayChangePlatform(ctx.actor.platformRoles);
  return ctx.actor.type === "apiKey";
}

/**
 * Throws unless the tenant has a seat for one more person, when the ctx's actor is held to the plan
 * (`heldToPlan`): see `assertTenantSeatFree`.
 */
export async function assertSeatFree(
  deps: BillingDeps,
  ctx: TenantCtx,
  tx: Executor,
  now: Date,
): Promise<void> {
  if (heldToPlan(ctx)) await assertTenantSeatFree(deps, ctx, tx, now);
}

/**
 * Throws unless the tenant has a seat for one more person, whoever acts: 402 `payment_required` when
 * its plan has no `seats`, 403 `usage_limit_reached` when members plus Pending, unexpired invitations
 * reach the limit. Counted under the tenant's row lock in the caller's transaction, so two invitations
 * at once cannot both take the last seat. The tenant's own provisioning (SSO just in time, SCIM) calls
 * it directly: its actor is anonymous or Plinth itself, yet the member it adds is the tenant's.
 */
export async function assertTenantSeatFree(
  deps: BillingDeps,
  ctx: TenantCtx,
  tx: Executor,
  now: Date,
): Promise<void> {
  const seats = (await cachedTenantFeatures(deps, ctx)).features.seats;
  if (!seats?.enabled) throw new AppError("payment_required", 'The tenant\'s plan does not include "seats".');
  if (seats.limit === null) return;
  await tx.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, ctx.tenantId)).for("update");
  const [row] = await tx
    .select({
      members: sql<number>`(select count(*)::int from ${tenantMemberships} where ${tenantMemberships.tenantId} = ${ctx.tenantId})`,
      pending: sql<number>`count(*)::int`,
    })
    .from(tenantInvitations)
    .where(
      and(
        eq(tenantInvitations.tenantId, ctx.tenantId),
        eq(tenantInvitations.status, "Pending"),
        gt(tenantInvitations.expiresAt, now),
      ),
    );
  if ((row?.members ?? 0) + (row?.pending ?? 0) + 1 > seats.limit)
    throw new AppError("usage_limit_reached", `The limit of "seats" (${seats.limit} seats) is reached.`);
}
