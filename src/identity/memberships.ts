import { and, asc, eq, or } from "drizzle-orm";
import type { AuthDeps } from "../auth/deps.ts";
import { sessionAuthOf } from "../auth/session-auth.ts";
import { callerOf, startTokenSession, type TokenPair } from "../auth/sessions.ts";
import { loadIdentity } from "../auth/user-identity.ts";
import type { Ctx } from "../context.ts";
import {
  type DatabaseDeps,
  withDatabase,
  withPlatformDatabase,
  withTenantOrPlatformDatabase,
} from "../db/operation.ts";
import { sessions, tenantMemberships, tenants, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { isUuid } from "../tenancy/tenants.ts";

export interface Membership {
  tenant: { id: string; code: string; name: string };
  role: string;
}

/** The most memberships `/api/auth/me` lists (by tenant code). */
export const MEMBERSHIPS_LISTED = 200;

/**
 * The tenants the caller may act in, with their role in each: Active memberships of Active tenants
 * (a tenant's own user: that tenant; a shared identity: every tenant it joined; platform staff: none).
 */
export async function listMemberships(deps: DatabaseDeps, ctx: Ctx): Promise<Membership[]> {
  const { userId } = callerOf(ctx);
  // the platform path: one person's memberships span tenants (read for the caller's own user only)
  const rows = await withPlatformDatabase(deps, { ...ctx, tx: undefined }, (db) =>
    db
      .select({ id: tenants.id, code: tenants.code, name: tenants.name, role: tenantMemberships.role })
      .from(tenantMemberships)
      .innerJoin(users, eq(users.id, tenantMemberships.userId))
      .innerJoin(tenants, eq(tenants.id, tenantMemberships.tenantId))
      .where(
        and(
          eq(tenantMemberships.userId, userId),
          eq(tenantMemberships.status, "Active"),
          eq(tenants.status, "Active"),
          // as sign-in reads them: a tenant's own user is a member of that tenant only
          or(eq(users.pool, "shared"), and(eq(users.pool, "tenant"), eq(users.tenantId, tenants.id))),
        ),
      )
      .orderBy(asc(tenants.code))
      .limit(MEMBERSHIPS_LISTED),
  );
  return rows.map(({ role, ...tenant }) => ({ tenant, role }));
}

/**
 * `listMemberships` through the session cache: a known user's `/api/auth/me` costs no database round
 * trip. Evicted in every process by a change of the user (`{ userId }`: a role, a membership joined,
 * disabled or removed) or of a tenant in the list (`{ tenantId }`: suspended); at most
 * `Authentication:SessionCacheSeconds` old should a notice be lost; a burst of the user's requests on a
 * miss shares one read.
 */
export function cachedMemberships(
  deps: DatabaseDeps & Pick<AuthDeps, "sessionCache">,
  ctx: Ctx,
): Promise<Membership[]> {
  return deps.sessionCache.user(callerOf(ctx).userId, async () => {
    const memberships = await listMemberships(deps, ctx);
    return { value: memberships, tenantIds: memberships.map((m) => m.tenant.id) };
  });
}

/** The user's memberships as `cachedMemberships` remembers them, or undefined when it would read them. */
export function rememberedMemberships(
  deps: Pick<AuthDeps, "sessionCache">,
  userId: string,
): Membership[] | undefined {
  return deps.sessionCache.rememberedUser<Membership[]>(userId);
}

const noSuchTenant = () => new AppError("not_found", "No such tenant.");

/**
 * A token pair for another tenant the caller is a member of, without a password: a new token
 * session there, ending when the caller's current one would (the old session stays open). `tenant`
 * is a code or an id; a tenant the caller is not an Active member of — unknown, suspended, another
 * tenant's own user, platform staff — is 404, the same answer for each. `within`: the tenant the
 * request's host belongs to (a custom domain switches to its own tenant only).
 */
export async function switchTenant(
  deps: AuthDeps,
  ctx: Ctx,
  input: { tenant: string; within: string | null },
): Promise<TokenPair> {
  const caller = callerOf(ctx);
  const key = input.tenant.trim().toLowerCase();
  // a named platform lookup: the tenant by its code or id, before the caller acts in it
  const [target] = await withPlatformDatabase(deps, { ...ctx, tx: undefined }, (db) =>
    db
      .select({ id: tenants.id })
      .from(tenants)
      .where(isUuid(key) ? eq(tenants.id, key) : eq(tenants.code, key))
      .limit(1),
  );
  if (!target || (input.within !== null && target.id !== input.within)) throw noSuchTenant();
  const [session] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({
        kind: sessions.kind,
        expiresAt: sessions.expiresAt,
        amr: sessions.amr,
        authTime: sessions.authTime,
        createdAt: sessions.createdAt,
      })
      .from(sessions)
      .where(eq(sessions.id, caller.sessionId)),
  );
  if (session?.kind !== "token")
    throw new AppError("forbidden", "Switch with a bearer token; a browser signs in on the tenant.");
  // the identity and the new session in the target tenant's context
  const targetCtx: Ctx = { ...ctx, tx: undefined, tenantId: target.id };
  const identity = await withDatabase(deps, targetCtx, (db) => loadIdentity(db, caller.userId, target.id));
  if (identity?.status !== "Active") throw noSuchTenant();
  // the same person, authenticated as before: the new session carries the old one's amr and auth_time
  return startTokenSession(
    deps,
    { identity, ctx: targetCtx, method: "switch", auth: sessionAuthOf(session) },
    { expiresAt: session.expiresAt },
  );
}
