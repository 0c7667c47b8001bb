import { and, eq, isNull, type SQL, sql } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import type { Executor } from "../db/client.ts";
import { type IdentityPool, tenantMemberships, tenants, users } from "../db/schema/index.ts";

/**
 * A user as authentication sees them in one tenant (the session's, or the sign-in's): that tenant,
 * the status there (the tenant's suspension and the membership's included) and the role there.
 */
export interface Identity {
  userId: string;
  /** The tenant the session acts in; null for platform staff. */
  tenantId: string | null;
  tenantCode: string | null;
  email: string;
  name: string;
  status: string;
  mustChangePassword: boolean;
  roles: string[];
  platformRoles: string[];
}

/** `column = tenantId`, or `column is null` for the platform. */
export function sameTenant(column: AnyPgColumn, tenantId: string | null): SQL {
  return tenantId ? eq(column, tenantId) : isNull(column);
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Who may sign in to `tenantId` (null: the platform): platform staff there; in a tenant, its own
 * users and shared identities — both only with a membership of it (the caller joins
 * `tenant_memberships` on the tenant). Staff never sign in to a tenant, a tenant's own user never to
 * another tenant, whatever membership rows say.
 */
export function signsInTo(tenantId: string | null): SQL {
  if (tenantId === null) return eq(users.pool, "platform");
  return sql`((${users.pool} = 'tenant' and ${users.tenantId} = ${tenantId}) or ${users.pool} = 'shared')`;
}

/** Joins a user's membership of the tenant `tenant` names (a session's column, or an id). */
export function membershipOf(tenant: AnyPgColumn | string | null): SQL {
  if (tenant === null) return sql`false`;
  return and(eq(tenantMemberships.userId, users.id), eq(tenantMemberships.tenantId, tenant)) as SQL;
}

/** The identity columns shared by loadIdentity and the per-request session lookup: one round trip. */
export const identityColumns = {
  userId: users.id,
  pool: users.pool,
  homeTenantId: users.tenantId,
  tenantId: tenants.id,
  tenantCode: tenants.code,
  email: users.email,
  name: users.name,
  userStatus: users.status,
  tenantStatus: tenants.status,
  memberRole: tenantMemberships.role,
  memberStatus: tenantMemberships.status,
  mustChangePassword: users.mustChangePassword,
  platformRoles: sql<
    string[]
  >`coalesce((select array_agg(b.role order by b.role) from platform_role_bindings b where b.user_id = ${users.id}), '{}')`,
};

type IdentityRow = {
  userId: string;
  pool: IdentityPool;
  homeTenantId: string | null;
  tenantId: string | null;
  tenantCode: string | null;
  email: string;
  name: string;
  userStatus: string;
  tenantStatus: string | null;
  memberRole: string | null;
  memberStatus: string | null;
  mustChangePassword: boolean;
  platformRoles: string[];
};

/** The status in the row's tenant: staff only outside tenants, everyone else only as an Active member. */
function statusOf(row: IdentityRow): string {
  if (row.tenantId === null) return row.pool === "platform" ? row.userStatus : "NotMember";
  if (row.pool === "platform" || (row.pool === "tenant" && row.homeTenantId !== row.tenantId))
    return "NotMember";
  if (row.tenantStatus !== "Active") return "TenantSuspended";
  if (row.memberRole === null) return "NotMember";
  if (row.memberStatus !== "Active") return "Disabled";
  return row.userStatus;
}

export function identityOf(row: IdentityRow): Identity {
  return {
    userId: row.userId,
    tenantId: row.tenantId,
    tenantCode: row.tenantCode,
    email: row.email,
    name: row.name,
    status: statusOf(row),
    mustChangePassword: row.mustChangePassword,
    roles: row.memberRole ? [row.memberRole] : [],
    platformRoles: row.tenantId === null ? (row.platformRoles ?? []) : [],
  };
}

/** A user's identity in `tenantId` (null: on the platform), or null for no such user. */
export async function loadIdentity(
  db: Executor,
  userId: string,
  tenantId: string | null,
): Promise<Identity | null> {
  const [row] = await db
    .select(identityColumns)
    .from(users)
    .leftJoin(tenants, tenantId === null ? sql`false` : eq(tenants.id, tenantId))
    .leftJoin(tenantMemberships, membershipOf(tenantId))
    .where(eq(users.id, userId))
    .limit(1);
  return row ? identityOf(row) : null;
}

/**
 * The one user `match` finds among those who may sign in to `tenantId` (`signsInTo`): the tenant's
 * own user before a shared identity, should an address be both.
 */
export async function findSignInUser(
  db: Executor,
  tenantId: string | null,
  match: SQL,
): Promise<{ id: string; passwordHash: string | null } | undefined> {
  const columns = { id: users.id, passwordHash: users.passwordHash };
  if (tenantId === null) {
    const [row] = await db
      .select(columns)
      .from(users)
      .where(and(signsInTo(null), match))
      .limit(1);
    return row;
  }
  const [row] = await db
    .select(columns)
    .from(users)
    .innerJoin(tenantMemberships, membershipOf(tenantId))
    .where(and(signsInTo(tenantId), match))
    .orderBy(sql`${users.pool} = 'tenant' desc`)
    .limit(1);
  return row;
}
