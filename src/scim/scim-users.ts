import { and, asc, eq, ne, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { announceUserChange } from "../auth/session-cache.ts";
import type { BillingDeps } from "../billing/billing-deps.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { scimGroupMembers, scimUsers, tenantMemberships, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { assertTenantSeatFree } from "../identity/invitation-rows.ts";
import {
  deleteTenantUser,
  disableTenantUser,
  memberWithEmail,
  type TenantUserDeps,
} from "../identity/users.ts";
import { isUuid } from "../tenancy/tenants.ts";
import {
  DEFAULT_PAGE,
  ENTERPRISE_USER_SCHEMA,
  listResponse,
  MAX_PAGE,
  USER_SCHEMA,
} from "./scim-discovery.ts";
import { ScimError, scimNotFound } from "./scim-error.ts";
import { filterCondition } from "./scim-filter.ts";
import { applyPatch, patchOperations } from "./scim-patch.ts";
import {
  parseUser,
  type UserInput,
  type UserRecord,
  userFilterColumns,
  userRecordColumns,
  userResource,
} from "./scim-user-resource.ts";

/**
 * SCIM Users (RFC 7644 §3) of the ctx's tenant: every member of the tenant is a User (`id` is the
 * identity's id, `userName` its address), so a directory finds members who joined before it did;
 * a User the directory creates is a new identity of the tenant's own pool without a password (it
 * signs in through the tenant's SSO). Deactivating (`active: false`) or deleting ends every session
 * of the member in the tenant at once on every API process (`disableTenantUser`, `deleteTenantUser`).
 */

export type ScimDeps = TenantUserDeps & BillingDeps;

const URNS = [USER_SCHEMA, ENTERPRISE_USER_SCHEMA];

function recordsQuery(db: Executor, tenantId: string) {
  return db
    .select(userRecordColumns)
    .from(tenantMemberships)
    .innerJoin(users, eq(users.id, tenantMemberships.userId))
    .leftJoin(
      scimUsers,
      and(eq(scimUsers.tenantId, tenantMemberships.tenantId), eq(scimUsers.userId, tenantMemberships.userId)),
    )
    .where(eq(tenantMemberships.tenantId, tenantId))
    .$dynamic();
}

async function loadRecord(db: Executor, tenantId: string, userId: string): Promise<UserRecord> {
  if (!isUuid(userId)) throw scimNotFound("User");
  const [record] = await recordsQuery(db, tenantId).where(
    and(eq(tenantMemberships.tenantId, tenantId), eq(tenantMemberships.userId, userId)),
  );
  if (!record) throw scimNotFound("User");
  return record;
}

export async function getScimUser(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { id: string; base: string },
): Promise<Record<string, unknown>> {
  const record = await withDatabase(deps, ctx, (db) => loadRecord(db, ctx.tenantId, input.id));
  return userResource(record, input.base);
}

/** A page of the tenant's Users matching `filter` (1-based `startIndex`, `count` at most `MAX_PAGE`). */
export async function listScimUsers(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { filter?: string; startIndex?: number; count?: number; base: string },
) {
  const where = input.filter ? filterCondition(input.filter, userFilterColumns, URNS) : undefined;
  const startIndex = Math.max(1, input.startIndex ?? 1);
  const count = Math.min(MAX_PAGE, Math.max(0, input.count ?? DEFAULT_PAGE));
  const { total, records } = await withDatabase(deps, ctx, async (db) => {
    const [counted] = await db
      .select({ n: sql<number>`count(*)::int` })
      .from(tenantMemberships)
      .innerJoin(users, eq(users.id, tenantMemberships.userId))
      .leftJoin(
        scimUsers,
        and(
          eq(scimUsers.tenantId, tenantMemberships.tenantId),
          eq(scimUsers.userId, tenantMemberships.userId),
        ),
      )
      .where(and(eq(tenantMemberships.tenantId, ctx.tenantId), where));
    const records =
      count === 0
        ? []
        : await recordsQuery(db, ctx.tenantId)
            .where(and(eq(tenantMemberships.tenantId, ctx.tenantId), where))
            .orderBy(asc(tenantMemberships.createdAt), asc(tenantMemberships.userId))
            .limit(count)
            .offset(startIndex - 1);
    return { total: counted?.n ?? 0, records };
  });
  return listResponse(
    records.map((record) => userResource(record, input.base)),
    total,
    startIndex,
  );
}

const taken = () => new ScimError("conflict", "A member of this tenant has this userName.", "uniqueness");

async function storeAttributes(tx: Tx, ctx: TenantCtx, userId: string, input: UserInput, now: Date) {
  await tx
    .insert(scimUsers)
    .values({
      tenantId: ctx.tenantId,
      userId,
      externalId: input.externalId,
      userName: input.userName,
      attributes: input.attributes,
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoUpdate({
      target: [scimUsers.tenantId, scimUsers.userId],
      set: {
        externalId: input.externalId,
        userName: input.userName,
        attributes: input.attributes,
        version: sql`${scimUsers.version} + 1`,
        updatedAt: now,
      },
    });
}

/**
 * A created User takes a seat of the tenant's plan (the directory acts for the tenant): a full plan,
 * or one without seats, is 403 (RFC 7644 §3.12 has no 402), its detail saying which.
 */
async function scimSeatFree(deps: ScimDeps, ctx: TenantCtx, tx: Tx, now: Date): Promise<void> {
  try {
    await assertTenantSeatFree(deps, ctx, tx, now);
  } catch (error) {
    if (
      error instanceof AppError &&
      (error.code === "usage_limit_reached" || error.code === "payment_required")
    )
      throw new ScimError("usage_limit_reached", `No seat is free for a new member: ${error.message}`);
    throw error;
  }
}

/** POST /Users: a new identity of the tenant's own pool and its membership (a member); 409 if the address is a member's. */
export async function createScimUser(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { body: unknown; base: string },
): Promise<Record<string, unknown>> {
  const user = parseUser(input.body);
  const now = deps.clock.now();
  const userId = await withTransaction(deps, ctx, async (tx, ctx) => {
    if (await memberWithEmail(tx, ctx.tenantId, user.email)) throw taken();
    await scimSeatFree(deps, ctx, tx, now);
    const status = user.active ? "Active" : "Disabled";
    const [created] = await tx
      .insert(users)
      .values({ tenantId: ctx.tenantId, pool: "tenant", email: user.email, name: user.displayName, status })
      .onConflictDoNothing()
      .returning({ id: users.id });
    if (!created) throw taken();
    await tx
      .insert(tenantMemberships)
      .values({ tenantId: ctx.tenantId, userId: created.id, role: "member", status });
    await storeAttributes(tx, ctx, created.id, user, now);
    await recordAudit(tx, ctx, {
      action: "scim.user_created",
      target: { type: "user", id: created.id },
      details: { email: user.email, status, role: "member" },
    });
    await emitEvent(tx, deps, {
      tenantId: ctx.tenantId,
      type: "user.created",
      data: { userId: created.id, email: user.email, role: "member" },
    });
    return created.id;
  });
  return getScimUser(deps, ctx, { id: userId, base: input.base });
}

/** Makes the member what `user` says (the address, the name, the attributes, active or not), in one transaction. */
async function writeUser(deps: ScimDeps, ctx: TenantCtx, userId: string, user: UserInput): Promise<void> {
  const now = deps.clock.now();
  await withTransaction(deps, ctx, async (tx, ctx) => {
    const record = await loadRecord(tx, ctx.tenantId, userId);
    await tx
      .select({ userId: tenantMemberships.userId })
      .from(tenantMemberships)
      .where(and(eq(tenantMemberships.tenantId, ctx.tenantId), eq(tenantMemberships.userId, userId)))
      .for("update");
    if (user.email !== record.email) {
      // a shared identity's address is the person's own, in every tenant: not the directory's to change
      if (record.pool !== "tenant")
        throw new ScimError(
          "validation_failed",
          "This member's userName (address) cannot be changed here.",
          "mutability",
        );
      const [other] = await tx
        .select({ id: users.id })
        .from(tenantMemberships)
        .innerJoin(users, eq(users.id, tenantMemberships.userId))
        .where(
          and(
            eq(tenantMemberships.tenantId, ctx.tenantId),
            eq(users.email, user.email),
            ne(users.id, userId),
          ),
        )
        .limit(1);
      if (other) throw taken();
    }
    if (record.pool === "tenant") {
      const changed = await tx
        .update(users)
        .set({ email: user.email, name: user.displayName, updatedAt: now })
        .where(
          and(
            eq(users.id, userId),
            sql`not exists (select 1 from users o where o.pool = 'tenant' and o.tenant_id = ${ctx.tenantId} and o.email = ${user.email} and o.id <> ${userId})`,
          ),
        )
        .returning({ id: users.id });
      if (changed.length === 0) throw taken();
    }
    await storeAttributes(tx, ctx, userId, user, now);
    await recordAudit(tx, ctx, {
      action: "scim.user_updated",
      target: { type: "user", id: userId },
      details: { email: user.email, status: user.active ? "Active" : "Disabled" },
    });
    if (record.active && !user.active) await disableTenantUser(deps, ctx, { userId });
    if (!record.active && user.active) {
      await tx
        .update(tenantMemberships)
        .set({ status: "Active" })
        .where(and(eq(tenantMemberships.tenantId, ctx.tenantId), eq(tenantMemberships.userId, userId)));
      if (record.pool === "tenant")
        await tx.update(users).set({ status: "Active", updatedAt: now }).where(eq(users.id, userId));
      await announceUserChange(deps.sessionCache, tx, userId);
      await recordAudit(tx, ctx, { action: "scim.user_reactivated", target: { type: "user", id: userId } });
    }
  });
}

/** PUT /Users/{id}: replaces the member's attributes with the body's. */
export async function replaceScimUser(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { id: string; body: unknown; base: string },
): Promise<Record<string, unknown>> {
  const user = parseUser(input.body);
  await withDatabase(deps, ctx, (db) => loadRecord(db, ctx.tenantId, input.id));
  await writeUser(deps, ctx, input.id, user);
  return getScimUser(deps, ctx, { id: input.id, base: input.base });
}

/** PATCH /Users/{id}: the operations applied to the current representation, then written as a replace. */
export async function patchScimUser(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { id: string; body: unknown; base: string },
): Promise<Record<string, unknown>> {
  const operations = patchOperations(input.body);
  const current = await getScimUser(deps, ctx, { id: input.id, base: input.base });
  const patched = applyPatch(current as never, operations) as Record<string, unknown>;
  await writeUser(deps, ctx, input.id, parseUser(patched));
  return getScimUser(deps, ctx, { id: input.id, base: input.base });
}

/** DELETE /Users/{id}: the member leaves the tenant (its own identity is deleted), its sessions end. */
export async function deleteScimUser(deps: ScimDeps, ctx: TenantCtx, input: { id: string }): Promise<void> {
  await withTransaction(deps, ctx, async (tx, ctx) => {
    await loadRecord(tx, ctx.tenantId, input.id);
    await tx
      .delete(scimGroupMembers)
      .where(and(eq(scimGroupMembers.tenantId, ctx.tenantId), eq(scimGroupMembers.userId, input.id)));
    await tx
      .delete(scimUsers)
      .where(and(eq(scimUsers.tenantId, ctx.tenantId), eq(scimUsers.userId, input.id)));
    await deleteTenantUser(deps, ctx, { userId: input.id });
  });
}
