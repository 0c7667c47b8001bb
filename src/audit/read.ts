import { and, asc, desc, eq, gte, lt, lte, type SQL, sql } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { auditEvents } from "../db/schema/audit.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";

/** An audit event as the API answers it (docs/audit.md). */
export interface AuditEventView {
  id: string;
  tenantId: string | null;
  occurredAt: string;
  actor: { type: string; id: string | null };
  action: string;
  target: { type: string; id: string | null } | null;
  outcome: string;
  clientAddress: string | null;
  userAgent: string | null;
  requestId: string | null;
  details: Record<string, unknown>;
  prevHash: string;
  hash: string;
}

/** The filters of a list or an export; `tenantId` undefined means every chain (platform admins only). */
export interface AuditFilter {
  /** A tenant's chain, null for the platform chain, undefined for all. */
  tenantId?: string | null;
  action?: string;
  /** An actor id (a user id, an API key id, a component name). */
  actor?: string;
  targetType?: string;
  targetId?: string;
  from?: Date;
  to?: Date;
}

type Row = typeof auditEvents.$inferSelect;

export function auditEventView(row: Row): AuditEventView {
  return {
    id: String(row.id),
    tenantId: row.tenantId,
    occurredAt: row.occurredAt.toISOString(),
    actor: { type: row.actorType, id: row.actorId },
    action: row.action,
    target: row.targetType === null ? null : { type: row.targetType, id: row.targetId },
    outcome: row.outcome,
    clientAddress: row.clientAddress,
    userAgent: row.userAgent,
    requestId: row.requestId,
    details: row.details,
    prevHash: row.prevHash,
    hash: row.hash,
  };
}

function conditions(filter: AuditFilter): (SQL | undefined)[] {
  return [
    filter.tenantId === undefined
      ? undefined
      : filter.tenantId === null
        ? sql`${auditEvents.tenantId} is null`
        : eq(auditEvents.tenantId, filter.tenantId),
    filter.action === undefined ? undefined : eq(auditEvents.action, filter.action),
    filter.actor === undefined ? undefined : eq(auditEvents.actorId, filter.actor),
    filter.targetType === undefined ? undefined : eq(auditEvents.targetType, filter.targetType),
    filter.targetId === undefined ? undefined : eq(auditEvents.targetId, filter.targetId),
    filter.from === undefined ? undefined : gte(auditEvents.occurredAt, filter.from),
    filter.to === undefined ? undefined : lt(auditEvents.occurredAt, filter.to),
  ];
}

/** A page of events, newest first, before `before` (an event id: keyset). */
async function pageOf(
  db: Executor,
  filter: AuditFilter,
  page: { limit: number; before?: number },
): Promise<{ items: AuditEventView[]; next: string | null }> {
  const rows = await db
    .select()
    .from(auditEvents)
    .where(
      and(...conditions(filter), page.before === undefined ? undefined : lt(auditEvents.id, page.before)),
    )
    .orderBy(desc(auditEvents.id))
    .limit(page.limit + 1);
  const items = rows.slice(0, page.limit).map(auditEventView);
  return { items, next: rows.length > page.limit ? (items.at(-1)?.id ?? null) : null };
}

export type AuditListInput = Omit<AuditFilter, "tenantId"> & { limit: number; cursor?: string };

const cursorOf = (cursor: string | undefined): number | undefined => {
  if (cursor === undefined) return undefined;
  if (!/^\d{1,18}$/.test(cursor))
    throw new AppError("validation_failed", "The request is not valid.", {
      fields: [{ path: "cursor", message: "not a cursor returned by this endpoint" }],
    });
  return Number(cursor);
};

/** The ctx tenant's own events, newest first, a page at a time (owners and admins). */
export async function listTenantAuditEvents(
  deps: Pick<Deps, "database">,
  ctx: Ctx & { tenantId: string },
  input: AuditListInput,
): Promise<{ items: AuditEventView[]; next: string | null }> {
  return pageOf(
    deps.database.db,
    { ...input, tenantId: ctx.tenantId },
    {
      limit: input.limit,
      before: cursorOf(input.cursor),
    },
  );
}

/** Any chain's events (platform admins): `tenantId` a tenant, null the platform chain, absent all. */
export async function listAuditEvents(
  deps: Pick<Deps, "database">,
  _ctx: Ctx,
  input: AuditListInput & { tenantId?: string | null },
): Promise<{ items: AuditEventView[]; next: string | null }> {
  return pageOf(deps.database.db, input, { limit: input.limit, before: cursorOf(input.cursor) });
}

/**
 * Every event matching `filter`, oldest first, read `batchSize` rows per round trip (keyset on the
 * id, up to the newest id when the export began): memory holds one batch whatever the range.
 */
export async function* exportAuditEvents(
  deps: Pick<Deps, "database" | "config">,
  _ctx: Ctx,
  filter: AuditFilter,
): AsyncGenerator<AuditEventView[]> {
  const db = deps.database.db;
  const batchSize = deps.config.settings.Audit.ExportBatchSize;
  // the range of ids to walk: a time range far back in a long log does not scan what precedes it
  const [range] = await db
    .select({
      first: sql<string | null>`min(${auditEvents.id})::text`,
      last: sql<string | null>`max(${auditEvents.id})::text`,
    })
    .from(auditEvents)
    .where(and(...conditions(filter)));
  if (!range?.first || !range.last) return;
  const last = Number(range.last);
  let after = Number(range.first) - 1;
  for (;;) {
    const rows = await db
      .select()
      .from(auditEvents)
      .where(and(...conditions(filter), sql`${auditEvents.id} > ${after}`, lte(auditEvents.id, last)))
      .orderBy(asc(auditEvents.id))
      .limit(batchSize);
    if (rows.length === 0) return;
    yield rows.map(auditEventView);
    after = rows.at(-1)?.id ?? last;
    if (rows.length < batchSize || after >= last) return;
  }
}
