import { and, asc, desc, eq, gte, lt, lte, type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { Ctx, TenantCtx } from "../context.ts";
import {
  type DatabaseDeps,
  withTenantOrPlatformDatabase,
  withTransactionOrPlatform,
} from "../db/operation.ts";
import { auditEvents } from "../db/schema/audit.ts";
import type { Deps } from "../deps.ts";
import { cursorCodec, type Page, pageOf } from "../pagination.ts";
import { chainOf } from "./chain.ts";
import { recordAudit } from "./record.ts";

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

/** A position in an event list: the last event's id (newest first, keyset), opaque to clients. */
export const auditCursor = cursorCodec(z.object({ id: z.number().int().positive() }));

/**
 * A page of events, newest first, before the cursor's event: in the ctx tenant's context, or on the
 * named platform path for platform admins (a ctx without a tenant reads every chain).
 */
async function eventPage(
  deps: DatabaseDeps,
  ctx: Ctx,
  filter: AuditFilter,
  input: { limit: number; cursor?: string },
): Promise<Page<AuditEventView>> {
  const before = auditCursor.decodeOptional(input.cursor)?.id;
  const rows = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select()
      .from(auditEvents)
      .where(and(...conditions(filter), before === undefined ? undefined : lt(auditEvents.id, before)))
      .orderBy(desc(auditEvents.id))
      .limit(input.limit + 1),
  );
  return pageOf(rows, input.limit, auditEventView, (row) => ({ id: row.id }), auditCursor);
}

export type AuditListInput = Omit<AuditFilter, "tenantId"> & { limit: number; cursor?: string };

/** The ctx tenant's own events, newest first, a page at a time (owners and admins). */
export async function listTenantAuditEvents(
  deps: DatabaseDeps,
  ctx: TenantCtx,
  input: AuditListInput,
): Promise<Page<AuditEventView>> {
  const { limit, cursor, ...filter } = input;
  return eventPage(deps, ctx, { ...filter, tenantId: ctx.tenantId }, { limit, cursor });
}

/** Any chain's events (platform admins): `tenantId` a tenant, null the platform chain, absent all. */
export async function listAuditEvents(
  deps: DatabaseDeps,
  ctx: Ctx,
  input: AuditListInput & { tenantId?: string | null },
): Promise<Page<AuditEventView>> {
  const { limit, cursor, ...filter } = input;
  return eventPage(deps, ctx, filter, { limit, cursor });
}

/**
 * The export's own row, written when it starts (after its range is fixed: the row is not in it), in
 * the chain exported (a tenant reads that its log was exported, and by whom), the platform chain
 * for an export of every chain. The filters go in `filter` as `name=value` strings.
 */
async function recordExport(deps: DatabaseDeps, ctx: Ctx, filter: AuditFilter, count: number): Promise<void> {
  const { tenantId, from, to, ...rest } = filter;
  const filters = [
    ...Object.entries(rest)
      .filter(([, value]) => value !== undefined)
      .map(([name, value]) => `${name}=${value}`),
    ...(from ? [`from=${from.toISOString()}`] : []),
    ...(to ? [`to=${to.toISOString()}`] : []),
  ];
  await withTransactionOrPlatform(deps, ctx, (tx, txCtx) =>
    recordAudit(tx, txCtx, {
      action: "audit.exported",
      tenantId: tenantId ?? null,
      target: { type: "audit_chain", id: tenantId === undefined ? null : chainOf(tenantId) },
      details: { filter: filters, count },
    }),
  );
}

/**
 * Every event matching `filter`, oldest first, read `batchSize` rows per round trip (keyset on the
 * id, up to the newest id when the export began): memory holds one batch whatever the range.
 */
export async function* exportAuditEvents(
  deps: DatabaseDeps & Pick<Deps, "config">,
  ctx: Ctx,
  filter: AuditFilter,
): AsyncGenerator<AuditEventView[]> {
  const batchSize = deps.config.settings.Audit.ExportBatchSize;
  // the range of ids to walk: a time range far back in a long log does not scan what precedes it
  const [range] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({
        first: sql<string | null>`min(${auditEvents.id})::text`,
        last: sql<string | null>`max(${auditEvents.id})::text`,
        count: sql<string>`count(*)::text`,
      })
      .from(auditEvents)
      .where(and(...conditions(filter))),
  );
  await recordExport(deps, ctx, filter, range?.first && range.last ? Number(range.count) : 0);
  if (!range?.first || !range.last) return;
  const last = Number(range.last);
  let after = Number(range.first) - 1;
  for (;;) {
    const from = after;
    const rows = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
      db
        .select()
        .from(auditEvents)
        .where(and(...conditions(filter), sql`${auditEvents.id} > ${from}`, lte(auditEvents.id, last)))
        .orderBy(asc(auditEvents.id))
        .limit(batchSize),
    );
    if (rows.length === 0) return;
    yield rows.map(auditEventView);
    after = rows.at(-1)?.id ?? last;
    if (rows.length < batchSize || after >= last) return;
  }
}
