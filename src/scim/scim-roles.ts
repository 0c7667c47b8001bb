import { and, eq, inArray } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { endSessions } from "../auth/sessions.ts";
import type { TenantCtx } from "../context.ts";
import type { Tx } from "../db/client.ts";
import type { DatabaseDeps } from "../db/operation.ts";
import { scimGroupMembers, scimGroups, type TenantRole, tenantMemberships } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { otherActiveOwners } from "../identity/users.ts";
import { ScimError } from "./scim-error.ts";

/**
 * Groups give roles (docs/scim.md): a group whose display name is a tenant role, or its plural, with
 * or without a `Plinth ` prefix (`Owners`, `admin`, `Plinth Admins`; any case), gives that role to its
 * members. A member's role is the highest its groups give, `member` when none does; it is worked out
 * again for each member whose groups changed, and only for them.
 */
const ROLE_GROUP = /^(?:plinth[\s_-]+)?(owner|admin|member)s?$/i;
const RANK: Record<TenantRole, number> = { member: 0, admin: 1, owner: 2 };

/** The role a group's display name gives, or null. */
export function roleOfGroup(displayName: string): TenantRole | null {
  const found = ROLE_GROUP.exec(displayName.trim())?.[1]?.toLowerCase();
  return (found as TenantRole | undefined) ?? null;
}

/** Sets each of `userIds`' role from their groups (every process hears of it); 409 for the last owner. */
export async function syncRoles(
  deps: DatabaseDeps & Pick<Deps, "sessionCache">,
  ctx: TenantCtx & { tx: Tx },
  userIds: readonly string[],
): Promise<void> {
  if (userIds.length === 0) return;
  const { tx, tenantId } = ctx;
  const groups = await tx
    .select({ userId: scimGroupMembers.userId, displayName: scimGroups.displayName })
    .from(scimGroupMembers)
    .innerJoin(scimGroups, eq(scimGroups.id, scimGroupMembers.groupId))
    .where(and(eq(scimGroupMembers.tenantId, tenantId), inArray(scimGroupMembers.userId, [...userIds])));
  const members = await tx
    .select({ userId: tenantMemberships.userId, role: tenantMemberships.role })
    .from(tenantMemberships)
    .where(and(eq(tenantMemberships.tenantId, tenantId), inArray(tenantMemberships.userId, [...userIds])))
    .for("update");
  for (const member of members) {
    let role: TenantRole = "member";
    for (const group of groups) {
      const given = group.userId === member.userId ? roleOfGroup(group.displayName) : null;
      if (given && RANK[given] > RANK[role]) role = given;
    }
    if (role === member.role) continue;
    if (member.role === "owner") {
      if ((await otherActiveOwners(tx, tenantId, member.userId)) === 0)
        throw new ScimError(
          "conflict",
          "A tenant keeps at least one active owner: its last owner keeps the role.",
        );
    }
    await tx
      .update(tenantMemberships)
      .set({ role })
      .where(and(eq(tenantMemberships.tenantId, tenantId), eq(tenantMemberships.userId, member.userId)));
    await recordAudit(tx, ctx, {
      action: "scim.member_role_changed",
      target: { type: "user", id: member.userId },
      details: { from: member.role, to: role },
    });
    // the role is read through the session cache: every process drops what it holds
    await endSessions(deps, ctx, { userId: member.userId });
  }
}
