import { and, eq, gt, isNull } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { completeSignIn } from "../auth/complete-sign-in.ts";
import type { MfaRequired } from "../auth/mfa-step.ts";
import { announceUserChange } from "../auth/session-cache.ts";
import type { TokenPair } from "../auth/sessions.ts";
import { consumeSingleUseToken } from "../auth/single-use-tokens.ts";
import { loadIdentity } from "../auth/user-identity.ts";
import type { Ctx } from "../context.ts";
import type { Tx } from "../db/client.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import { tenantInvitations, tenantMemberships, tenants, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { hashPassword, passwordProblem } from "../security/passwords.ts";
import type { InvitationDeps } from "./invitation-rows.ts";

/** A uuid no invitation has: the look-up of a link that named none finds nothing, at the same cost. */
const NO_INVITATION = "00000000-0000-0000-0000-000000000000";

/** The one answer to a link that is unknown, expired, revoked or used: none tells which. */
const deadLink = () =>
  new AppError("not_found", "The invitation link is not valid (expired, revoked or used).");

export interface AcceptInput {
  token: string;
  name?: string;
  password?: string;
}

interface Invitation {
  id: string;
  tenantId: string;
  email: string;
  role: "owner" | "admin" | "member";
  privateIdentities: boolean;
}

/** The identity the invitation joins: the address's shared identity (a sharing tenant), else none yet. */
async function existingIdentity(tx: Tx, invitation: Invitation): Promise<string | null> {
  if (invitation.privateIdentities) return null;
  const [row] = await tx
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.pool, "shared"), eq(users.email, invitation.email)));
  return row?.id ?? null;
}

/** A new identity for the invitee: the tenant's own (private tenants) or a shared one; name and password required. */
async function newIdentity(tx: Tx, invitation: Invitation, input: AcceptInput, now: Date): Promise<string> {
  const missing = (["name", "password"] as const).filter((field) => !input[field]?.trim());
  if (missing.length > 0)
    throw new AppError("validation_failed", "A new account needs a name and a password.", {
      fields: missing.map((path) => ({ path, message: "required to create the account" })),
    });
  const name = (input.name ?? "").trim();
  const password = input.password ?? "";
  const weakness = await passwordProblem(password, { email: invitation.email, name });
  if (weakness)
    throw new AppError("validation_failed", "The request is not valid.", {
      fields: [{ path: "password", message: weakness }],
    });
  const [created] = await tx
    .insert(users)
    .values({
      pool: invitation.privateIdentities ? "tenant" : "shared",
      tenantId: invitation.privateIdentities ? invitation.tenantId : null,
      email: invitation.email,
      name,
      passwordHash: await hashPassword(password),
      passwordChangedAt: now,
      // the link mailed to the address proved it
      emailVerifiedAt: now,
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoNothing()
    .returning({ id: users.id });
  // the address got an identity of this pool since the check (a concurrent acceptance): join it
  return created?.id ?? (await existingIdentity(tx, invitation)) ?? Promise.reject(deadLink());
}

/**
 * Accepts an invitation with the token its link carries, and signs the invitee in to the tenant (a
 * token pair, or the second-factor step of an identity that has a factor, as every sign-in ends). The link proves the address: an address with a shared identity joins it (its
 * password stays; `name` and `password` are not needed), any other gets a new identity with them
 * (the tenant's own when it keeps identities private). The invitation is used up in the same
 * transaction as the membership, the audit row (`invitation.accepted`) and the events; a link that
 * is unknown, expired, revoked or already used is 404 whichever it is.
 */
export async function acceptInvitation(
  deps: InvitationDeps,
  ctx: Ctx,
  input: AcceptInput,
): Promise<TokenPair | MfaRequired> {
  const now = deps.clock.now();
  // the named platform path: the token names the invitation's tenant (checked against the request's),
  // and the shared identity it joins or creates belongs to no tenant (users with tenant_id null are
  // visible in a tenant's context only once they are its members)
  return withPlatformTransaction(deps, ctx, async (tx, txCtx) => {
    // spent in this transaction: a refusal below (a missing password) leaves the link usable
    const consumed = await consumeSingleUseToken(deps, txCtx, {
      purpose: "invitation",
      token: input.token,
      tenantId: ctx.tenantId === null ? undefined : ctx.tenantId,
    });
    const [invitation] = await tx
      .select({
        id: tenantInvitations.id,
        tenantId: tenantInvitations.tenantId,
        email: tenantInvitations.email,
        role: tenantInvitations.role,
        privateIdentities: tenants.privateIdentities,
      })
      .from(tenantInvitations)
      .innerJoin(tenants, eq(tenants.id, tenantInvitations.tenantId))
      .where(
        and(
          eq(tenantInvitations.id, consumed?.subject ?? NO_INVITATION),
          eq(tenantInvitations.status, "Pending"),
          gt(tenantInvitations.expiresAt, now),
          eq(tenants.status, "Active"),
        ),
      )
      .for("update", { of: tenantInvitations });
    if (!invitation) throw deadLink();
    const existing = await existingIdentity(tx, invitation);
    const userId = existing ?? (await newIdentity(tx, invitation, input, now));
    if (existing)
      await tx
        .update(users)
        .set({ emailVerifiedAt: now })
        .where(and(eq(users.id, existing), isNull(users.emailVerifiedAt)));
    const joined = await tx
      .insert(tenantMemberships)
      .values({ tenantId: invitation.tenantId, userId, role: invitation.role, createdAt: now })
      .onConflictDoNothing()
      .returning({ userId: tenantMemberships.userId });
    if (joined.length === 0) throw new AppError("conflict", "You are a member of this tenant already.");
    // an identity signed in elsewhere lists this tenant at once in every process
    if (existing) await announceUserChange(deps.sessionCache, tx, userId);
    await tx
      .update(tenantInvitations)
      .set({ status: "Accepted", acceptedAt: now, acceptedBy: userId, updatedAt: now })
      .where(eq(tenantInvitations.id, invitation.id));
    const identity = await loadIdentity(tx, userId, invitation.tenantId);
    if (identity?.status !== "Active") throw deadLink();
    const memberCtx = {
      ...txCtx,
      tenantId: invitation.tenantId,
      actor: { type: "user" as const, userId, sessionId: "", roles: identity.roles, platformRoles: [] },
    };
    await recordAudit(tx, memberCtx, {
      action: "invitation.accepted",
      target: { type: "invitation", id: invitation.id },
      details: { role: invitation.role, identity: existing ? "existing" : "new" },
    });
    const data = { invitationId: invitation.id, userId, email: invitation.email, role: invitation.role };
    await emitEvent(tx, deps, { tenantId: invitation.tenantId, type: "invitation.accepted", data });
    await emitEvent(tx, deps, {
      tenantId: invitation.tenantId,
      type: "user.created",
      data: { userId, email: invitation.email, role: invitation.role },
    });
    // the link proves the address, not the person: an identity with a second factor takes the step
    return completeSignIn(deps, { identity, ctx: txCtx, method: "invitation" });
  });
}
