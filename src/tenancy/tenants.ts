import { and, asc, eq, gt, ilike, inArray, or, sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { endSessions } from "../auth/sessions.ts";
import type { Clock } from "../clock.ts";
import type { Ctx } from "../context.ts";
import { execute } from "../db/client.ts";
import { type DatabaseDeps, withDatabase, withTransaction } from "../db/operation.ts";
import { tenants } from "../db/schema/tenants.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { cursorCodec, type Page, pageOf } from "../pagination.ts";
import { isUuid } from "../uuid.ts";

export interface Tenant {
  id: string;
  code: string;
  name: string;
  status: "Active" | "Suspended";
}

export const TENANT_CODE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** Re-exported: tenancy is where most callers meet ids (the check itself lives in src/uuid.ts). */
export { isUuid };

const columns = { id: tenants.id, code: tenants.code, name: tenants.name, status: tenants.status };
const noSuchTenant = () => new AppError("not_found", "No such tenant.");

/**
 * Creates a tenant and records `tenant.created` in its own chain, in one transaction. A code kept
 * for a deleted tenant is judged by the injected clock, as a reserved hostname is.
 */
export async function createTenant(
  deps: DatabaseDeps & { clock: Clock },
  ctx: Ctx,
  input: { code: string; name: string },
): Promise<Tenant> {
  const code = input.code.toLowerCase();
  if (!TENANT_CODE.test(code))
    throw new AppError("validation_failed", "The tenant code is not valid.", {
      fields: [{ path: "code", message: "lower-case letters, digits and inner hyphens, at most 63" }],
    });
  // the new tenant's rows are written in its own context (its id chosen here, before the insert)
  const id = crypto.randomUUID();
  const now = deps.clock.now();
  return withTransaction(deps, { ...ctx, tenantId: id }, async (tx, ctx) => {
    // a deleted tenant's code stays its own for Tenancy:ReservedDays (docs/tenant-lifecycle.md)
    const [reserved] = await execute(
      tx,
      sql`select 1 from tenant_reservations where kind = 'code' and value = ${code} and reserved_until > ${now.toISOString()}::timestamptz`,
    );
    if (reserved) throw new AppError("conflict", "A tenant with this code exists.");
    const [row] = await tx
      .insert(tenants)
      .values({ id, code, name: input.name })
      .onConflictDoNothing({ target: tenants.code })
      .returning(columns);
    if (!row) throw new AppError("conflict", "A tenant with this code exists.");
    await recordAudit(tx, ctx, {
      action: "tenant.created",
      target: { type: "tenant", id: row.id },
      details: { code },
      tenantId: row.id,
    });
    return row;
  });
}

/** A position in the tenant list: the last code seen (keyset). */
export const tenantCursor = cursorCodec(z.object({ code: z.string().regex(TENANT_CODE) }));

/**
 * A page of tenants by code, after `cursor` (keyset). `search`: a code prefix or a part of the
 * name, case-insensitive, matched literally.
 */
export async function listTenants(
  deps: DatabaseDeps,
  ctx: Ctx,
  input: { limit: number; cursor?: string; search?: string },
): Promise<Page<Tenant>> {
  const after = tenantCursor.decodeOptional(input.cursor)?.code;
  const search = input.search?.trim();
  const pattern = search ? search.replace(/[\\%_]/g, "\\$&") : undefined;
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select(columns)
      .from(tenants)
      .where(
        and(
          after === undefined ? undefined : gt(tenants.code, after),
          pattern === undefined
            ? undefined
            : or(ilike(tenants.code, `${pattern}%`), ilike(tenants.name, `%${pattern}%`)),
        ),
      )
      .orderBy(asc(tenants.code))
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    (row) => row,
    (row) => ({ code: row.code }),
    tenantCursor,
  );
}

/** The tenant, or a 404 problem: unknown and malformed ids look the same. */
export async function getTenant(deps: DatabaseDeps, ctx: Ctx, input: { tenantId: string }): Promise<Tenant> {
  if (!isUuid(input.tenantId)) throw noSuchTenant();
  const [row] = await withDatabase(deps, ctx, (db) =>
    db.select(columns).from(tenants).where(eq(tenants.id, input.tenantId)),
  );
  if (!row) throw noSuchTenant();
  return row;
}

/**
 * Suspends a tenant: its users' sessions and its hosts stop working at once (the tenant lookup
 * cache is cleared and every process's session cache hears of it).
 */
export async function suspendTenant(
  deps: DatabaseDeps & Pick<Deps, "clock" | "tenants" | "sessionCache">,
  ctx: Ctx,
  input: { tenantId: string },
): Promise<Tenant> {
  // the suspended tenant's sessions and audit row: in its context
  const row = await withTransaction(deps, { ...ctx, tenantId: input.tenantId }, async (tx, ctx) => {
    await getTenant(deps, ctx, input);
    const [suspended] = await tx
      .update(tenants)
      .set({ status: "Suspended", updatedAt: deps.clock.now() })
      .where(eq(tenants.id, input.tenantId))
      .returning(columns);
    if (!suspended) throw noSuchTenant();
    // the sessions end with the suspension: every process hears of it as it commits
    await endSessions(deps, ctx, { tenantId: input.tenantId });
    await recordAudit(tx, ctx, {
      action: "tenant.suspended",
      target: { type: "tenant", id: input.tenantId },
      tenantId: input.tenantId,
    });
    return suspended;
  });
  deps.tenants.clear();
  return row;
}

/** The codes of the given tenant ids (ids that are not a tenant are left out). */
export async function getTenantCodes(
  deps: DatabaseDeps,
  ctx: Ctx,
  input: { ids: readonly string[] },
): Promise<Map<string, string>> {
  const valid = [...new Set(input.ids.filter(isUuid))];
  if (valid.length === 0) return new Map();
  const rows = await withDatabase(deps, ctx, (db) =>
    db.select({ id: tenants.id, code: tenants.code }).from(tenants).where(inArray(tenants.id, valid)),
  );
  return new Map(rows.map((r) => [r.id, r.code]));
}
