import { and, asc, eq, inArray, ne, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { scimGroupMembers, scimGroups, tenantMemberships, tenants, users } from "../db/schema/index.ts";
import { isUuid } from "../tenancy/tenants.ts";
import { DEFAULT_PAGE, GROUP_SCHEMA, listResponse, MAX_PAGE } from "./scim-discovery.ts";
import { invalidValue, ScimError, scimNotFound } from "./scim-error.ts";
import { type FilterColumns, filterCondition, type ScalarColumn } from "./scim-filter.ts";
import { applyPatch, patchOperations } from "./scim-patch.ts";
import { roleOfGroup, syncRoles } from "./scim-roles.ts";
import type { ScimDeps } from "./scim-users.ts";

/**
 * SCIM Groups (RFC 7643 §4.2) of the ctx's tenant: stored per tenant (`scim_groups`, its members in
 * `scim_group_members`), members being the tenant's members. A group named after a role gives it
 * (scim-roles.ts). Writes lock the tenant's row, so group changes of one tenant (and the roles worked
 * out from them) follow one another.
 */

type GroupRow = typeof scimGroups.$inferSelect;

const text = (expr: ReturnType<typeof sql>, caseExact = false): ScalarColumn => ({
  kind: "scalar",
  expr,
  type: "string",
  caseExact,
});

const groupFilterColumns: FilterColumns = {
  id: text(sql`${scimGroups.id}::text`, true),
  displayname: text(sql`${scimGroups.displayName}`),
  externalid: text(sql`${scimGroups.externalId}`, true),
  members: {
    kind: "multi",
    primary: "value",
    exists: (cond) =>
      sql`exists (select 1 from scim_group_members gm where gm.group_id = ${scimGroups.id} and ${cond})`,
    sub: (name) => (name === "value" ? text(sql`gm.user_id::text`, true) : undefined),
  },
  "meta.created": { kind: "scalar", expr: sql`${scimGroups.createdAt}`, type: "date" },
  "meta.lastmodified": { kind: "scalar", expr: sql`${scimGroups.updatedAt}`, type: "date" },
};

interface GroupInput {
  displayName: string;
  externalId: string | null;
  memberIds: string[];
}

const field = (body: Record<string, unknown>, name: string) =>
  body[Object.keys(body).find((k) => k.toLowerCase() === name.toLowerCase()) ?? ""];

function parseGroup(body: unknown): GroupInput {
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new ScimError("validation_failed", "The body is a Group resource.", "invalidSyntax");
  const resource = body as Record<string, unknown>;
  const schemas = field(resource, "schemas");
  if (
    !Array.isArray(schemas) ||
    !schemas.some((s) => typeof s === "string" && s.toLowerCase() === GROUP_SCHEMA.toLowerCase())
  )
    throw new ScimError("validation_failed", `"schemas" lists ${GROUP_SCHEMA}.`, "invalidSyntax");
  const displayName = field(resource, "displayName");
  if (typeof displayName !== "string" || !displayName.trim() || displayName.length > 256)
    throw invalidValue('"displayName" is required (at most 256 characters).');
  const externalId = field(resource, "externalId");
  if (externalId !== undefined && externalId !== null && typeof externalId !== "string")
    throw invalidValue('"externalId" is a string.');
  const members = field(resource, "members") ?? [];
  if (!Array.isArray(members)) throw invalidValue('"members" is a list.');
  const memberIds = members.map((member: unknown) => {
    const value =
      member && typeof member === "object" ? field(member as Record<string, unknown>, "value") : undefined;
    if (typeof value !== "string") throw invalidValue('Each member has a "value" (a User id).');
    return value;
  });
  return {
    displayName: displayName.trim(),
    externalId: typeof externalId === "string" && externalId ? externalId : null,
    memberIds: [...new Set(memberIds)],
  };
}

async function membersOf(db: Executor, tenantId: string, groupIds: string[]) {
  if (groupIds.length === 0) return [];
  return db
    .select({ groupId: scimGroupMembers.groupId, userId: users.id, email: users.email })
    .from(scimGroupMembers)
    .innerJoin(users, eq(users.id, scimGroupMembers.userId))
    .where(and(eq(scimGroupMembers.tenantId, tenantId), inArray(scimGroupMembers.groupId, groupIds)))
    .orderBy(asc(users.email));
}

function groupResource(row: GroupRow, members: { userId: string; email: string }[], base: string) {
  return {
    schemas: [GROUP_SCHEMA],
    id: row.id,
    ...(row.externalId !== null ? { externalId: row.externalId } : {}),
    displayName: row.displayName,
    members: members.map((m) => ({
      value: m.userId,
      display: m.email,
      type: "User",
      $ref: `${base}/scim/v2/Users/${m.userId}`,
    })),
    meta: {
      resourceType: "Group",
      created: row.createdAt.toISOString(),
      lastModified: row.updatedAt.toISOString(),
      location: `${base}/scim/v2/Groups/${row.id}`,
      version: `W/"${row.version}"`,
    },
  };
}

async function loadGroup(db: Executor, tenantId: string, id: string): Promise<GroupRow> {
  if (!isUuid(id)) throw scimNotFound("Group");
  const [row] = await db
    .select()
    .from(scimGroups)
    .where(and(eq(scimGroups.tenantId, tenantId), eq(scimGroups.id, id)));
  if (!row) throw scimNotFound("Group");
  return row;
}

export async function getScimGroup(deps: ScimDeps, ctx: TenantCtx, input: { id: string; base: string }) {
  return withDatabase(deps, ctx, async (db) => {
    const row = await loadGroup(db, ctx.tenantId, input.id);
    return groupResource(row, await membersOf(db, ctx.tenantId, [row.id]), input.base);
  });
}

export async function listScimGroups(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { filter?: string; startIndex?: number; count?: number; base: string },
) {
  const where = input.filter ? filterCondition(input.filter, groupFilterColumns, [GROUP_SCHEMA]) : undefined;
  const startIndex = Math.max(1, input.startIndex ?? 1);
  const count = Math.min(MAX_PAGE, Math.max(0, input.count ?? DEFAULT_PAGE));
  return withDatabase(deps, ctx, async (db) => {
    const scope = and(eq(scimGroups.tenantId, ctx.tenantId), where);
    const [counted] = await db.select({ n: sql<number>`count(*)::int` }).from(scimGroups).where(scope);
    const rows =
      count === 0
        ? []
        : await db
            .select()
            .from(scimGroups)
            .where(scope)
            .orderBy(asc(scimGroups.createdAt), asc(scimGroups.id))
            .limit(count)
            .offset(startIndex - 1);
    const members = await membersOf(
      db,
      ctx.tenantId,
      rows.map((row) => row.id),
    );
    const resources = rows.map((row) =>
      groupResource(
        row,
        members.filter((m) => m.groupId === row.id),
        input.base,
      ),
    );
    return listResponse(resources, counted?.n ?? 0, startIndex);
  });
}

async function lockTenant(tx: Tx, tenantId: string): Promise<void> {
  await tx.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).for("update");
}

async function assertFreeName(tx: Tx, tenantId: string, displayName: string, except?: string) {
  const [other] = await tx
    .select({ id: scimGroups.id })
    .from(scimGroups)
    .where(
      and(
        eq(scimGroups.tenantId, tenantId),
        sql`lower(${scimGroups.displayName}) = lower(${displayName})`,
        except ? ne(scimGroups.id, except) : undefined,
      ),
    )
    .limit(1);
  if (other) throw new ScimError("conflict", "A group of this tenant has this displayName.", "uniqueness");
}

/** Replaces a group's members with `memberIds` (each a member of the tenant) and returns whose changed. */
async function setMembers(tx: Tx, tenantId: string, groupId: string, memberIds: string[]): Promise<string[]> {
  const valid = memberIds.filter(isUuid);
  const known =
    valid.length === 0
      ? []
      : await tx
          .select({ userId: tenantMemberships.userId })
          .from(tenantMemberships)
          .where(and(eq(tenantMemberships.tenantId, tenantId), inArray(tenantMemberships.userId, valid)));
  if (known.length !== memberIds.length) throw invalidValue("Every member is a User of this tenant.");
  const before = await tx
    .select({ userId: scimGroupMembers.userId })
    .from(scimGroupMembers)
    .where(eq(scimGroupMembers.groupId, groupId));
  const was = new Set(before.map((m) => m.userId));
  const now = new Set(memberIds);
  const gone = [...was].filter((id) => !now.has(id));
  const added = [...now].filter((id) => !was.has(id));
  if (gone.length > 0)
    await tx
      .delete(scimGroupMembers)
      .where(and(eq(scimGroupMembers.groupId, groupId), inArray(scimGroupMembers.userId, gone)));
  if (added.length > 0)
    await tx.insert(scimGroupMembers).values(added.map((userId) => ({ tenantId, groupId, userId })));
  return [...gone, ...added];
}

export async function createScimGroup(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { body: unknown; base: string },
) {
  const group = parseGroup(input.body);
  const now = deps.clock.now();
  const id = await withTransaction(deps, ctx, async (tx, ctx) => {
    await lockTenant(tx, ctx.tenantId);
    await assertFreeName(tx, ctx.tenantId, group.displayName);
    const [row] = await tx
      .insert(scimGroups)
      .values({
        tenantId: ctx.tenantId,
        displayName: group.displayName,
        externalId: group.externalId,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    if (!row) throw new Error("the group was not stored");
    const changed = await setMembers(tx, ctx.tenantId, row.id, group.memberIds);
    await recordAudit(tx, ctx, {
      action: "scim.group_created",
      target: { type: "scim_group", id: row.id },
      details: {
        name: group.displayName,
        role: roleOfGroup(group.displayName) ?? "none",
        count: changed.length,
      },
    });
    await syncRoles(deps, ctx, changed);
    return row.id;
  });
  return getScimGroup(deps, ctx, { id, base: input.base });
}

async function writeGroup(deps: ScimDeps, ctx: TenantCtx, id: string, group: GroupInput): Promise<void> {
  await withTransaction(deps, ctx, async (tx, ctx) => {
    await lockTenant(tx, ctx.tenantId);
    const row = await loadGroup(tx, ctx.tenantId, id);
    await assertFreeName(tx, ctx.tenantId, group.displayName, id);
    await tx
      .update(scimGroups)
      .set({
        displayName: group.displayName,
        externalId: group.externalId,
        version: sql`${scimGroups.version} + 1`,
        updatedAt: deps.clock.now(),
      })
      .where(eq(scimGroups.id, id));
    const changed = await setMembers(tx, ctx.tenantId, id, group.memberIds);
    await recordAudit(tx, ctx, {
      action: "scim.group_updated",
      target: { type: "scim_group", id },
      details: {
        name: group.displayName,
        role: roleOfGroup(group.displayName) ?? "none",
        count: changed.length,
      },
    });
    // a rename may change the role the group gives: then every member's is worked out again
    const renamed = roleOfGroup(row.displayName) !== roleOfGroup(group.displayName);
    await syncRoles(deps, ctx, renamed ? [...new Set([...group.memberIds, ...changed])] : changed);
  });
}

export async function replaceScimGroup(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { id: string; body: unknown; base: string },
) {
  const group = parseGroup(input.body);
  await writeGroup(deps, ctx, input.id, group);
  return getScimGroup(deps, ctx, input);
}

export async function patchScimGroup(
  deps: ScimDeps,
  ctx: TenantCtx,
  input: { id: string; body: unknown; base: string },
) {
  const operations = patchOperations(input.body);
  const current = await getScimGroup(deps, ctx, input);
  const patched = applyPatch(current as never, operations) as Record<string, unknown>;
  await writeGroup(deps, ctx, input.id, parseGroup(patched));
  return getScimGroup(deps, ctx, input);
}

export async function deleteScimGroup(deps: ScimDeps, ctx: TenantCtx, input: { id: string }): Promise<void> {
  await withTransaction(deps, ctx, async (tx, ctx) => {
    await lockTenant(tx, ctx.tenantId);
    const row = await loadGroup(tx, ctx.tenantId, input.id);
    const members = await tx
      .select({ userId: scimGroupMembers.userId })
      .from(scimGroupMembers)
      .where(eq(scimGroupMembers.groupId, row.id));
    await tx.delete(scimGroups).where(eq(scimGroups.id, row.id));
    await recordAudit(tx, ctx, {
      action: "scim.group_deleted",
      target: { type: "scim_group", id: row.id },
      details: { name: row.displayName },
    });
    await syncRoles(
      deps,
      ctx,
      members.map((m) => m.userId),
    );
  });
}
