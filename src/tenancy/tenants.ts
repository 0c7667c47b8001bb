import { and, asc, eq, gt, ilike, inArray, or } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { endSessions } from "../auth/sessions.ts";
import { type Ctx, systemCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { tenants } from "../db/schema/tenants.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";

export interface Tenant {
  id: string;
  code: string;
  name: string;
  status: "Active" | "Suspended";
}

export const TENANT_CODE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

const columns = { id: tenants.id, code: tenants.code, name: tenants.name, status: tenants.status };

/** Creates a tenant and records `tenant.created` in its own chain, in one transaction. */
export async function createTenant(
  db: Executor,
  input: { code: string; name: string },
  ctx: Ctx = systemCtx("tenancy"),
): Promise<Tenant> {
  const code = input.code.toLowerCase();
  if (!TENANT_CODE.test(code))
    throw new AppError("validation_failed", "The tenant code is not valid.", {
      fields: [{ path: "code", message: "lower-case letters, digits and inner hyphens, at most 63" }],
    });
  return db.transaction(async (tx) => {
    const [row] = await tx
      .insert(tenants)
      .values({ code, name: input.name })
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

/** The opaque cursor of a position in the tenant list (the last code seen, base64url), and back. */
export const tenantCursor = {
  encode: (code: string): string => Buffer.from(code).toString("base64url"),
  decode: (cursor: string): string | null => {
    const code = Buffer.from(cursor, "base64url").toString();
    return code.length > 0 && code.length <= 63 ? code : null;
  },
};

/**
 * A page of tenants by code: after `after` (a code; keyset), or skipping `offset` rows (the older
 * paging, still accepted). `next` is the last code of a full page, null on the last page.
 */
export async function listTenants(
  db: Executor,
  input: { limit: number; offset?: number; after?: string; search?: string },
): Promise<{ items: Tenant[]; next: string | null }> {
  const search = input.search?.trim();
  // `search`: a code prefix or a part of the name, case-insensitive, matched literally
  const pattern = search ? search.replace(/[\\%_]/g, "\\$&") : undefined;
  const rows = await db
    .select(columns)
    .from(tenants)
    .where(
      and(
        input.after === undefined ? undefined : gt(tenants.code, input.after),
        pattern === undefined
          ? undefined
          : or(ilike(tenants.code, `${pattern}%`), ilike(tenants.name, `%${pattern}%`)),
      ),
    )
    .orderBy(asc(tenants.code))
    .limit(input.limit + 1)
    .offset(input.after === undefined ? (input.offset ?? 0) : 0);
  const items = rows.slice(0, input.limit);
  return { items, next: rows.length > input.limit ? (items.at(-1)?.code ?? null) : null };
}

/** The tenant, or a 404 problem: unknown and malformed ids look the same. */
export async function getTenant(db: Executor, tenantId: string): Promise<Tenant> {
  if (!isUuid(tenantId)) throw new AppError("not_found", "No such tenant.");
  const [row] = await db.select(columns).from(tenants).where(eq(tenants.id, tenantId));
  if (!row) throw new AppError("not_found", "No such tenant.");
  return row;
}

/**
 * Suspends a tenant: its users' sessions and its hosts stop working at once (the tenant lookup
 * cache is cleared and every process's session cache hears of it).
 */
export async function suspendTenant(
  deps: Pick<Deps, "database" | "clock" | "tenants" | "sessionCache">,
  ctx: Ctx,
  input: { tenantId: string },
): Promise<Tenant> {
  const db = deps.database.db;
  await getTenant(db, input.tenantId);
  const row = await db.transaction(async (tx) => {
    const [suspended] = await tx
      .update(tenants)
      .set({ status: "Suspended", updatedAt: deps.clock.now() })
      .where(eq(tenants.id, input.tenantId))
      .returning(columns);
    if (!suspended) throw new AppError("not_found", "No such tenant.");
    // the sessions end with the suspension: every process hears of it as it commits
    await endSessions(deps, { tenantId: input.tenantId }, tx);
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
export async function tenantCodes(db: Executor, ids: readonly string[]): Promise<Map<string, string>> {
  const valid = [...new Set(ids.filter(isUuid))];
  if (valid.length === 0) return new Map();
  const rows = await db
    .select({ id: tenants.id, code: tenants.code })
    .from(tenants)
    .where(inArray(tenants.id, valid));
  return new Map(rows.map((r) => [r.id, r.code]));
}
