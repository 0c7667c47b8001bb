import { eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { findSignInUser, type Identity, loadIdentity } from "../auth/user-identity.ts";
import type { TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { type TenantRole, tenantMemberships, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { assertTenantSeatFree } from "../identity/invitation-rows.ts";
import type { SsoConnectionRow, SsoProfile } from "./connection-types.ts";
import type { SsoDeps } from "./sso-deps.ts";

const RANK: Record<TenantRole, number> = { member: 0, admin: 1, owner: 2 };

/** The role a provisioned member gets: the highest of the groups the connection maps, else its default. */
export function mappedRole(
  connection: Pick<SsoConnectionRow, "defaultRole" | "groupRoles">,
  groups: string[],
) {
  let role: TenantRole | null = null;
  for (const group of groups) {
    const mapped = connection.groupRoles[group];
    if (mapped && (role === null || RANK[mapped] > RANK[role])) role = mapped;
  }
  return role ?? connection.defaultRole;
}

/** Why a sign-in has no member: the member is disabled, or a new one would exceed the plan's seats. */
export interface SsoMemberRefusal {
  refused: "member" | "seats";
  detail: string;
}

/**
 * The member an SSO sign-in is for (docs/sso.md, "Just-in-time provisioning"): the tenant's member
 * with the address (its own user first, as password sign-in finds them), else a new user of the
 * tenant's own pool with no password and a membership in the role the groups map to, created with
 * its audit row (`sso.user_provisioned`) and `user.created` event, when the plan has a seat for it
 * (`assertTenantSeatFree`, whoever acts). An existing member keeps the role the tenant gave them.
 * Refused when the address belongs to a member the tenant has disabled, or no seat is free.
 */
export async function provisionSsoMember(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { connection: SsoConnectionRow; profile: SsoProfile },
): Promise<{ identity: Identity; provisioned: boolean } | SsoMemberRefusal> {
  const { tenantId } = ctx;
  const email = input.profile.email;
  const existing = await withDatabase(deps, ctx, (db) =>
    findSignInUser(db, tenantId, eq(users.email, email)),
  );
  let provisioned = false;
  let userId = existing?.id;
  if (!userId) {
    const role = mappedRole(input.connection, input.profile.groups);
    const seated = await withTransaction(deps, ctx, async (tx, txCtx) => {
      try {
        await assertTenantSeatFree(deps, txCtx, tx, deps.clock.now());
      } catch (error) {
        if (
          error instanceof AppError &&
          (error.code === "usage_limit_reached" || error.code === "payment_required")
        )
          return {
            refused: "seats" as const,
            detail: `No seat is free for a new member: ${error.message} An owner frees a seat or changes the plan.`,
          };
        throw error;
      }
      const [created] = await tx
        .insert(users)
        .values({ tenantId, pool: "tenant", email, name: input.profile.name.slice(0, 200) })
        .onConflictDoNothing()
        .returning({ id: users.id });
      // a sign-in at the same moment created them: theirs is the user
      if (!created) return undefined;
      await tx.insert(tenantMemberships).values({ tenantId, userId: created.id, role });
      await recordAudit(tx, txCtx, {
        action: "sso.user_provisioned",
        target: { type: "user", id: created.id },
        details: { connectionId: input.connection.id, role, email },
      });
      await emitEvent(tx, deps, {
        tenantId,
        type: "user.created",
        data: { userId: created.id, email, role },
      });
      return created.id;
    });
    if (typeof seated === "object") return seated;
    userId = seated;
    provisioned = userId !== undefined;
    userId ??= (await withDatabase(deps, ctx, (db) => findSignInUser(db, tenantId, eq(users.email, email))))
      ?.id;
  }
  const disabled = { refused: "member", detail: "This member is disabled in the tenant." } as const;
  if (!userId) return disabled;
  const identity = await withDatabase(deps, ctx, (db) => loadIdentity(db, userId, tenantId));
  if (identity?.status !== "Active") return disabled;
  return { identity, provisioned };
}
