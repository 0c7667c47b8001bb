import { and, asc, eq, isNull, ne, sql } from "drizzle-orm";
import { z } from "zod";
import { scopesReachMember } from "../api-keys/scopes.ts";
import { recordAudit } from "../audit/record.ts";
import { endSessions } from "../auth/sessions.ts";
import { devicesOf, revokeTrustedDevices } from "../auth/trusted-devices.ts";
import type { BillingDeps } from "../billing/billing-deps.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { type DatabaseDeps, withDatabase, withTransaction } from "../db/operation.ts";
import { preparedPerExecutor } from "../db/prepared.ts";
import {
  type IdentityPool,
  sessions,
  type TenantRole,
  tenantMemberships,
  tenantRoles,
  tenants,
  users,
} from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { createdAtPosition, cursorCodec, type Page, pageByCreation } from "../pagination.ts";
import { hashPassword, MIN_PASSWORD_LENGTH, passwordProblem } from "../security/passwords.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { assertSeatFree, heldToPlan } from "./invitation-rows.ts";
import { mayChangePlatform } from "./roles.ts";

export const newUserSchema = z.object({
  email: z.email().max(320),
  name: z.string().trim().min(1).max(200),
  password: z.string().min(MIN_PASSWORD_LENGTH).max(1024),
  role: z.enum(tenantRoles).default("member"),
  phone: z
    .string()
    .regex(/^\+[1-9]\d{6,14}$/, "must be an E.164 number such as +14155550100")
    .optional(),
});
export type NewUser = z.input<typeof newUserSchema>;

export interface TenantUser {
  id: string;
  email: string;
  name: string;
  phone: string | null;
  status: string;
  role: TenantRole | null;
  mustChangePassword: boolean;
  createdAt: string;
}

const notFound = () => new AppError("not_found", "No such user.");

/**
 * Whether the ctx's actor may manage owners: an owner, a platform administrator (who creates a
 * tenant's first owner) or Plinth itself may; a tenant admin manages users but not owners — it
 * cannot create, disable or remove one (docs/roles.md); nor can an API key.
 */
function managesOwners(ctx: TenantCtx): boolean {
  if (ctx.actor.type === "user")
    return ctx.actor.roles.includes("owner") || mayChangePlatform(ctx.actor.platformRoles);
  return ctx.actor.type !== "apiKey";
}
const notForAdmins = () => new AppError("forbidden", "Only an owner manages owners.");

/**
 * A key creates or changes only a principal with no more power than itself: a member, and only when
 * its scopes reach everything a member reaches (`MEMBER_REACH`); never an admin (who manages keys and
 * reads the audit log, as no key does) nor an owner (docs/api-keys.md). Users act on users by role.
 */
function assertKeyOutranks(ctx: TenantCtx, role: TenantRole | null | undefined): void {
  if (ctx.actor.type !== "apiKey") return;
  if (role !== "member")
    throw new AppError(
      "forbidden",
      "An API key creates and changes members only, never an admin or an owner.",
    );
  if (!scopesReachMember(ctx.actor.scopes))
    throw new AppError(
      "forbidden",
      'An API key creates and changes only members it could act as: it needs "storage:*" too.',
    );
}

/** Throws unless the ctx's actor may give `role` to someone: only an owner an owner; a key a member only. */
export function assertMayGrant(ctx: TenantCtx, role: TenantRole): void {
  if (role === "owner" && !managesOwners(ctx)) throw notForAdmins();
  assertKeyOutranks(ctx, role);
}

export type TenantUserDeps = DatabaseDeps & Pick<Deps, "clock" | "sessionCache">;

/**
 * Adds a user to the ctx's tenant (a tenant owner or admin, or a platform administrator creating
 * the first owner) with a password someone else chose: the user must change it at first sign-in
 * (`mustChangePassword`), like the bootstrap admin. Only an owner adds an owner (403).
 */
export async function createTenantUser(
  deps: DatabaseDeps & Pick<Deps, "clock"> & Partial<Omit<BillingDeps, "database" | "clock">>,
  ctx: TenantCtx,
  input: NewUser,
): Promise<{ id: string }> {
  if (input.role === "owner" && !managesOwners(ctx)) throw notForAdmins();
  const user = newUserSchema.parse(input);
  assertKeyOutranks(ctx, user.role);
  const weakness = await passwordProblem(user.password, { email: user.email, name: user.name });
  if (weakness)
    throw new AppError("validation_failed", "The request is not valid.", {
      fields: [{ path: "password", message: weakness }],
    });
  const { tenantId } = ctx;
  await getTenant(deps, ctx, { tenantId });
  const passwordHash = await hashPassword(user.password);
  const email = user.email.toLowerCase();
  return withTransaction(deps, ctx, async (tx) => {
    // a shared identity already a member here with this address: the same person, added twice
    if (await memberWithEmail(tx, tenantId, email))
      throw new AppError("conflict", "A user with this e-mail or phone exists in this tenant.");
    // a new member takes a seat as an invitation does (402/403); platform admins and the
    // factories' system ctx are not held to the plan
    if (heldToPlan(ctx)) await assertSeatFree(billingDepsOf(deps), ctx, tx, deps.clock.now());
    const inserted = await tx
      .insert(users)
      .values({
        tenantId,
        pool: "tenant",
        email,
        name: user.name,
        phone: user.phone,
        passwordHash,
        mustChangePassword: true,
      })
      .onConflictDoNothing()
      .returning({ id: users.id });
    const created = inserted[0];
    if (!created) throw new AppError("conflict", "A user with this e-mail or phone exists in this tenant.");
    await tx.insert(tenantMemberships).values({ tenantId, userId: created.id, role: user.role });
    await recordAudit(tx, ctx, {
      action: "user.created",
      target: { type: "user", id: created.id },
      details: { role: user.role },
    });
    await emitEvent(tx, deps, {
      tenantId,
      type: "user.created",
      data: { userId: created.id, email: user.email.toLowerCase(), role: user.role },
    });
    return created;
  });
}

/** The billing deps a seat check needs: every caller held to the plan comes through a route's Deps. */
function billingDepsOf(
  deps: DatabaseDeps & Pick<Deps, "clock"> & Partial<Omit<BillingDeps, "database" | "clock">>,
): BillingDeps {
  const { database, cache, clock, logger, config } = deps;
  if (!isDatabase(database) || cache === undefined || !logger || !config)
    throw new Error("createTenantUser: a caller held to the plan needs the billing deps");
  return { database, cache, clock, logger, config };
}

function isDatabase(database: DatabaseDeps["database"]): database is BillingDeps["database"] {
  return "driver" in database && "ping" in database;
}

/** Whether `email` is a member of the tenant already, by any identity (its own or a shared one). */
export async function memberWithEmail(tx: Executor, tenantId: string, email: string): Promise<boolean> {
  const [row] = await tx
    .select({ id: users.id })
    .from(tenantMemberships)
    .innerJoin(users, eq(users.id, tenantMemberships.userId))
    .where(and(eq(tenantMemberships.tenantId, tenantId), eq(users.email, email)))
    .limit(1);
  return row !== undefined;
}

/** Where a page of users ends: the last user's creation time (PostgreSQL's exact text) and id. */
export const userCursor = cursorCodec(createdAtPosition);

/** The columns of a users page, and its statement with the tenant, the size and (after) the cursor as placeholders. */
function usersPageQuery(db: Executor, after: boolean) {
  const tenantId = sql.placeholder("tenantId");
  return db
    .select({
      id: users.id,
      email: users.email,
      name: users.name,
      phone: users.phone,
      status: sql<string>`case when ${tenantMemberships.status} = 'Active' then ${users.status} else ${tenantMemberships.status} end`,
      role: tenantMemberships.role,
      mustChangePassword: users.mustChangePassword,
      createdAt: users.createdAt,
      position: sql<string>`${users.createdAt}::text`,
    })
    .from(tenantMemberships)
    .innerJoin(users, eq(users.id, tenantMemberships.userId))
    .where(
      and(
        eq(tenantMemberships.tenantId, tenantId),
        after
          ? sql`(${users.createdAt}, ${users.id}) > (${sql.placeholder("afterCreatedAt")}::timestamptz, ${sql.placeholder("afterId")}::uuid)`
          : undefined,
      ),
    )
    .orderBy(asc(users.createdAt), asc(users.id))
    .limit(sql.placeholder("limit"))
    .prepare(after ? "list_tenant_users_after" : "list_tenant_users");
}
// built once per executor: the list is read on every page of every tenant's user screen
const firstUsersPage = preparedPerExecutor((db) => usersPageQuery(db, false));
const nextUsersPage = preparedPerExecutor((db) => usersPageQuery(db, true));

/**
 * A page of the ctx tenant's users in creation order, after `cursor` (keyset: creation time, then
 * id, compared in the database at full precision).
 */
export async function listTenantUsers(
  deps: DatabaseDeps,
  ctx: TenantCtx,
  input: { limit: number; cursor?: string },
): Promise<Page<TenantUser>> {
  const { tenantId } = ctx;
  const after = userCursor.decodeOptional(input.cursor);
  const limit = input.limit + 1;
  const rows = await withDatabase(deps, ctx, (db) =>
    after
      ? nextUsersPage(db).execute({ tenantId, limit, afterCreatedAt: after.createdAt, afterId: after.id })
      : firstUsersPage(db).execute({ tenantId, limit }),
  );
  return pageByCreation(
    rows,
    input.limit,
    (row) => ({ ...row, createdAt: row.createdAt.toISOString() }),
    userCursor,
  );
}

/** How many active owners of `tenantId` (active accounts) there are besides `userId`. */
export async function otherActiveOwners(tx: Executor, tenantId: string, userId: string): Promise<number> {
  const [row] = await tx
    .select({ others: sql<number>`count(*)::int` })
    .from(tenantMemberships)
    .innerJoin(users, eq(users.id, tenantMemberships.userId))
    .where(
      and(
        eq(tenantMemberships.tenantId, tenantId),
        eq(tenantMemberships.role, "owner"),
        ne(tenantMemberships.userId, userId),
        eq(tenantMemberships.status, "Active"),
        eq(users.status, "Active"),
      ),
    );
  return row?.others ?? 0;
}

async function assertNotLastOwner(tx: Executor, tenantId: string, userId: string): Promise<void> {
  const others = await otherActiveOwners(tx, tenantId, userId);
  const [target] = await tx
    .select({ role: tenantMemberships.role })
    .from(tenantMemberships)
    .where(and(eq(tenantMemberships.tenantId, tenantId), eq(tenantMemberships.userId, userId)));
  if (target?.role === "owner" && others === 0) {
    throw new AppError("conflict", "A tenant keeps at least one active owner.");
  }
}

/**
 * Locks a user of this tenant for a change that must keep an owner; another tenant's user is "not
 * found". The tenant row is locked first (FOR UPDATE): every change that can disable or remove an
 * owner goes through here, so they serialise per tenant and the owner count below cannot be stale
 * (two owners disabling each other at once: the second sees the first's change and is refused).
 */
async function lockChangeableUser(tx: Executor, ctx: TenantCtx, userId: string): Promise<IdentityPool> {
  const { tenantId } = ctx;
  const [tenant] = await tx
    .select({ id: tenants.id })
    .from(tenants)
    .where(eq(tenants.id, tenantId))
    .for("update");
  if (!tenant) throw notFound();
  // a user of this tenant is one with a membership here (its own user, or a shared identity)
  const [membership] = await tx
    .select({ role: tenantMemberships.role, pool: users.pool })
    .from(tenantMemberships)
    .innerJoin(users, eq(users.id, tenantMemberships.userId))
    .where(and(eq(tenantMemberships.tenantId, tenantId), eq(tenantMemberships.userId, userId)))
    .for("update", { of: tenantMemberships });
  if (!membership) throw notFound();
  if (!managesOwners(ctx)) {
    if (membership.role === "owner" && ctx.actor.type !== "apiKey") throw notForAdmins();
    assertKeyOutranks(ctx, membership.role);
  }
  await assertNotLastOwner(tx, tenantId, userId);
  return membership.pool;
}

/**
 * Disables a user in the ctx's tenant (the membership; the tenant's own user as a whole) and revokes
 * their sessions there in one transaction (a tenant keeps
 * one active owner: 409); the session caches of every process hear of it as it commits.
 */
export async function disableTenantUser(
  deps: TenantUserDeps,
  ctx: TenantCtx,
  input: { userId: string },
): Promise<void> {
  const { userId } = input;
  const now = deps.clock.now();
  await withTransaction(deps, ctx, async (tx, ctx) => {
    const pool = await lockChangeableUser(tx, ctx, userId);
    const { tenantId } = ctx;
    await tx
      .update(tenantMemberships)
      .set({ status: "Disabled" })
      .where(and(eq(tenantMemberships.tenantId, tenantId), eq(tenantMemberships.userId, userId)));
    // the tenant's own user is disabled as a whole; a shared identity only here
    if (pool === "tenant")
      await tx.update(users).set({ status: "Disabled", updatedAt: now }).where(eq(users.id, userId));
    await revokeTrustedDevices(tx, ctx, now, { where: devicesOf(userId, tenantId), reason: "user disabled" });
    await tx
      .update(sessions)
      .set({ revokedAt: now, revokedReason: "user disabled" })
      .where(and(eq(sessions.userId, userId), eq(sessions.tenantId, tenantId), isNull(sessions.revokedAt)));
    await endSessions(deps, ctx, { userId });
    await recordAudit(tx, ctx, { action: "user.disabled", target: { type: "user", id: userId } });
    await emitEvent(tx, deps, { tenantId: ctx.tenantId, type: "user.disabled", data: { userId } });
  });
}

/**
 * Removes a user from the ctx's tenant: its own user is deleted (their sessions go with the row); a
 * shared identity loses this membership and its sessions here. Every cache hears of it as it commits.
 */
export async function deleteTenantUser(
  deps: TenantUserDeps,
  ctx: TenantCtx,
  input: { userId: string },
): Promise<void> {
  const { userId } = input;
  await withTransaction(deps, ctx, async (tx, ctx) => {
    const pool = await lockChangeableUser(tx, ctx, userId);
    await revokeTrustedDevices(tx, ctx, deps.clock.now(), {
      where: devicesOf(userId, ctx.tenantId),
      reason: "user removed",
    });
    if (pool === "tenant")
      await tx.delete(users).where(and(eq(users.id, userId), eq(users.tenantId, ctx.tenantId)));
    else {
      // a shared identity leaves this tenant only; its sessions here end with the membership
      await tx
        .delete(tenantMemberships)
        .where(and(eq(tenantMemberships.tenantId, ctx.tenantId), eq(tenantMemberships.userId, userId)));
      await tx
        .update(sessions)
        .set({ revokedAt: deps.clock.now(), revokedReason: "membership removed" })
        .where(
          and(eq(sessions.userId, userId), eq(sessions.tenantId, ctx.tenantId), isNull(sessions.revokedAt)),
        );
    }
    await endSessions(deps, ctx, { userId });
    await recordAudit(tx, ctx, { action: "user.deleted", target: { type: "user", id: userId } });
    await emitEvent(tx, deps, { tenantId: ctx.tenantId, type: "user.deleted", data: { userId } });
  });
}
