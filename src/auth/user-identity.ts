import { eq, isNull, type SQL, sql } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import type { Executor } from "../db/client.ts";
import { tenants, users } from "../db/schema/index.ts";

/** A user as authentication sees them: tenant, status (the tenant's suspension included) and roles. */
export interface Identity {
  userId: string;
  tenantId: string | null;
  tenantCode: string | null;
  email: string;
  name: string;
  status: string;
  mustChangePassword: boolean;
  roles: string[];
  platformRoles: string[];
}

/** `column = tenantId`, or `column is null` for platform staff. */
export function sameTenant(column: AnyPgColumn, tenantId: string | null): SQL {
  return tenantId ? eq(column, tenantId) : isNull(column);
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** The identity columns shared by loadIdentity and the per-request session lookup: one round trip. */
export const identityColumns = {
  userId: users.id,
  tenantId: users.tenantId,
  tenantCode: tenants.code,
  email: users.email,
  name: users.name,
  userStatus: users.status,
  tenantStatus: tenants.status,
  mustChangePassword: users.mustChangePassword,
  roles: sql<
    string[]
  >`coalesce((select array_agg(m.role order by m.role) from tenant_memberships m where m.user_id = ${users.id}), '{}')`,
  platformRoles: sql<
    string[]
  >`coalesce((select array_agg(b.role order by b.role) from platform_role_bindings b where b.user_id = ${users.id}), '{}')`,
};

type IdentityRow = {
  userId: string;
  tenantId: string | null;
  tenantCode: string | null;
  email: string;
  name: string;
  userStatus: string;
  tenantStatus: string | null;
  mustChangePassword: boolean;
  roles: string[];
  platformRoles: string[];
};

export function identityOf(row: IdentityRow): Identity {
  const status = row.tenantId && row.tenantStatus !== "Active" ? "TenantSuspended" : row.userStatus;
  return {
    userId: row.userId,
    tenantId: row.tenantId,
    tenantCode: row.tenantCode,
    email: row.email,
    name: row.name,
    status,
    mustChangePassword: row.mustChangePassword,
    roles: row.roles ?? [],
    platformRoles: row.platformRoles ?? [],
  };
}

export async function loadIdentity(db: Executor, userId: string): Promise<Identity | null> {
  const [row] = await db
    .select(identityColumns)
    .from(users)
    .leftJoin(tenants, eq(tenants.id, users.tenantId))
    .where(eq(users.id, userId))
    .limit(1);
  return row ? identityOf(row) : null;
}
