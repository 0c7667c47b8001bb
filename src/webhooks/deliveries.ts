import { sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { TenantCtx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { createdAtPosition, cursorCodec, type Page, pageOf } from "../pagination.ts";
import { isUuid } from "../tenancy/tenants.ts";
import { enqueueAttempt } from "./deliver.ts";

const toDate = (value: string | Date) => (value instanceof Date ? value : new Date(value));

export interface DeliveryAttemptView {
  attempt: number;
  statusCode: number | null;
  durationMs: number;
  errorClass: string | null;
  attemptedAt: string;
}

export interface DeliveryView {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  status: "pending" | "succeeded" | "failed";
  attemptCount: number;
  lastStatusCode: number | null;
  lastErrorClass: string | null;
  nextAttemptAt: string | null;
  attempts: DeliveryAttemptView[];
  createdAt: string;
}

interface ViewRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryView["status"];
  attempts: number;
  last_status_code: number | null;
  last_error_class: string | null;
  next_attempt_at: string | Date | null;
  created_at: string | Date;
  position: string;
  log:
    | {
        attempt: number;
        status_code: number | null;
        duration_ms: number;
        error_class: string | null;
        attempted_at: string;
      }[]
    | null;
}

function deliveryView(row: ViewRow): DeliveryView {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    eventId: row.event_id,
    eventType: row.event_type,
    status: row.status,
    attemptCount: row.attempts,
    lastStatusCode: row.last_status_code,
    lastErrorClass: row.last_error_class,
    nextAttemptAt: row.next_attempt_at ? toDate(row.next_attempt_at).toISOString() : null,
    attempts: (row.log ?? []).map((a) => ({
      attempt: a.attempt,
      statusCode: a.status_code,
      durationMs: a.duration_ms,
      errorClass: a.error_class,
      attemptedAt: new Date(a.attempted_at).toISOString(),
    })),
    createdAt: toDate(row.created_at).toISOString(),
  };
}

/** The delivery log's keyset: creation time (PostgreSQL's exact text) and id, newest first. */
const deliveryCursor = cursorCodec(createdAtPosition);

function viewQuery(where: ReturnType<typeof sql>, limit: number) {
  return sql`select d.id, d.endpoint_id, d.event_id, ev.type as event_type, d.status, d.attempts,
                    d.last_status_code, d.last_error_class, d.next_attempt_at, d.created_at,
                    d.created_at::text as position,
                    (select json_agg(json_build_object('attempt', a.attempt, 'status_code', a.status_code,
                                                       'duration_ms', a.duration_ms, 'error_class', a.error_class,
                                                       'attempted_at', a.attempted_at) order by a.attempt)
                     from webhook_delivery_attempts a where a.delivery_id = d.id) as log
             from webhook_deliveries d join webhook_events ev on ev.id = d.event_id
             where ${where}
             order by d.created_at desc, d.id desc
             limit ${limit}`;
}

async function assertEndpoint(db: Executor, tenantId: string, endpointId: string): Promise<void> {
  if (!isUuid(endpointId)) throw new AppError("not_found", "No such webhook endpoint.");
  const [row] = await execute(
    db,
    sql`select 1 from webhook_endpoints where id = ${endpointId} and tenant_id = ${tenantId}`,
  );
  if (!row) throw new AppError("not_found", "No such webhook endpoint.");
}

/** A page of an endpoint's delivery log, newest first (keyset: creation time, then id). */
export async function listDeliveries(
  deps: Pick<Deps, "database">,
  ctx: TenantCtx,
  input: { endpointId: string; limit: number; cursor?: string },
): Promise<Page<DeliveryView>> {
  const rows = await withDatabase(deps, ctx, async (db) => {
    await assertEndpoint(db, ctx.tenantId, input.endpointId);
    const after = deliveryCursor.decodeOptional(input.cursor);
    return execute<ViewRow>(
      db,
      viewQuery(
        sql`d.tenant_id = ${ctx.tenantId} and d.endpoint_id = ${input.endpointId}
            ${after ? sql`and (d.created_at, d.id) < (${after.createdAt}::timestamptz, ${after.id}::uuid)` : sql``}`,
        input.limit + 1,
      ),
    );
  });
  return pageOf(
    rows,
    input.limit,
    deliveryView,
    (row) => ({ createdAt: row.position, id: row.id }),
    deliveryCursor,
  );
}

/** One delivery of the endpoint, scoped to the ctx's tenant (404 otherwise). */
async function deliveryOf(
  db: Executor,
  ctx: TenantCtx,
  endpointId: string,
  deliveryId: string,
): Promise<DeliveryView> {
  if (!isUuid(deliveryId) || !isUuid(endpointId)) throw new AppError("not_found", "No such delivery.");
  const [row] = await execute<ViewRow>(
    db,
    viewQuery(
      sql`d.tenant_id = ${ctx.tenantId} and d.endpoint_id = ${endpointId} and d.id = ${deliveryId}`,
      1,
    ),
  );
  if (!row) throw new AppError("not_found", "No such delivery.");
  return deliveryView(row);
}

/**
 * Sends a finished delivery (failed or succeeded) once more now: one extra attempt, which retries
 * on the rest of `Webhooks:RetrySeconds` only if attempts remain there. 409 while it is still pending.
 */
export async function retryDelivery(
  deps: Pick<Deps, "database" | "clock" | "config">,
  ctx: TenantCtx,
  input: { endpointId: string; deliveryId: string },
): Promise<DeliveryView> {
  await withTransaction(deps, ctx, async (tx, txCtx) => {
    const current = await deliveryOf(tx, ctx, input.endpointId, input.deliveryId);
    const now = deps.clock.now();
    const [claimed] = await execute<{ attempts: number }>(
      tx,
      sql`update webhook_deliveries set status = 'pending', next_attempt_at = ${now.toISOString()}::timestamptz, updated_at = ${now.toISOString()}::timestamptz
          where id = ${current.id} and status <> 'pending' returning attempts`,
    );
    if (!claimed)
      throw new AppError("conflict", "The delivery is still pending; its next attempt is scheduled.");
    await enqueueAttempt(deps, tx, ctx.tenantId, current.id, claimed.attempts + 1);
    await recordAudit(tx, txCtx, {
      action: "webhook_delivery.retried",
      target: { type: "webhook_delivery", id: current.id },
      details: { attempts: claimed.attempts + 1, event: current.eventType },
    });
  });
  return withDatabase(deps, ctx, (db) => deliveryOf(db, ctx, input.endpointId, input.deliveryId));
}

/** Sends again every failed delivery of the endpoint created at or after `since`. */
export async function replayFailedDeliveries(
  deps: Pick<Deps, "database" | "clock" | "config">,
  ctx: TenantCtx,
  input: { endpointId: string; since: Date },
): Promise<{ replayed: number }> {
  return withTransaction(deps, ctx, async (tx, txCtx) => {
    await assertEndpoint(tx, ctx.tenantId, input.endpointId);
    const now = deps.clock.now().toISOString();
    const rows = await execute<{ id: string; attempts: number }>(
      tx,
      sql`update webhook_deliveries set status = 'pending', next_attempt_at = ${now}::timestamptz, updated_at = ${now}::timestamptz
          where tenant_id = ${ctx.tenantId} and endpoint_id = ${input.endpointId} and status = 'failed'
            and created_at >= ${input.since.toISOString()}::timestamptz
          returning id, attempts`,
    );
    for (const row of rows) await enqueueAttempt(deps, tx, ctx.tenantId, row.id, row.attempts + 1);
    await recordAudit(tx, txCtx, {
      action: "webhook_endpoint.replayed",
      target: { type: "webhook_endpoint", id: input.endpointId },
      details: { count: rows.length, from: input.since },
    });
    return { replayed: rows.length };
  });
}
