import { sql } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { systemCtx, type TenantCtx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import {
  DELIVER_JOB_ATTEMPTS,
  DELIVER_KIND,
  deliverJob,
  deliverPayload,
  deliveryDedupKey,
  emitEvent,
} from "../events/outbox.ts";
import { enqueue, enqueueContext } from "../jobs/enqueue.ts";
import { defineJob, type JobContext, type JobDefinition } from "../jobs/registry.ts";
import { defineSchedule } from "../jobs/schedules.ts";
import { isUuid } from "../tenancy/tenants.ts";
import { sendDelivery } from "./destinations.ts";
import { destinationPolicy, openSigningSecrets, type WebhookDeps } from "./endpoints.ts";
import { signedHeaders } from "./signing.ts";

/** At most this much of a receiver's answer is read; the rest is dropped. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
const DAY_MS = 86_400_000;

export type DeliveryDeps = WebhookDeps & Pick<Deps, "telemetry">;

interface DeliveryRow {
  id: string;
  tenant_id: string;
  status: string;
  attempts: number;
  endpoint_id: string;
  url: string;
  enabled: boolean;
  event_type: string;
  event_data: unknown;
  occurred_at: string | Date;
  cur_key_id: string | null;
  cur_nonce: string | null;
  cur_ciphertext: string | null;
  prev_key_id: string | null;
  prev_nonce: string | null;
  prev_ciphertext: string | null;
}

const toDate = (value: string | Date) => (value instanceof Date ? value : new Date(value));

/** The Standard Webhooks message id of a delivery: the same on every attempt, so receivers can dedupe. */
export const messageId = (deliveryId: string) => `msg_${deliveryId.replaceAll("-", "")}`;

/** The JSON body of a delivery: `{type, timestamp, data}`. */
export function deliveryBody(type: string, occurredAt: Date, data: unknown): string {
  return JSON.stringify({ type, timestamp: occurredAt.toISOString(), data });
}

/**
 * One delivery attempt (the `webhooks.deliver` job): signs and POSTs the event, then records the
 * attempt and its outcome in one transaction — on failure with the next attempt enqueued after
 * `Webhooks:RetrySeconds[attempt - 1]`, or the delivery given up when the list is spent. An
 * endpoint failing for `Webhooks:DisableAfterDays` is disabled there, with a
 * `webhook.endpoint_disabled` event. An HTTP failure is a recorded attempt, not a job failure: the
 * job itself runs again only when its process died before recording (lease takeover), and an attempt
 * already recorded is not made twice.
 */
export async function deliverAttempt(
  deps: DeliveryDeps,
  payload: z.output<typeof deliverPayload>,
  job?: Pick<JobContext, "signal">,
): Promise<"succeeded" | "failed" | "skipped"> {
  const db = deps.database.db;
  const nowText = deps.clock.now().toISOString();
  // one round trip: the delivery, its endpoint and event, and the sealed secrets that sign it
  const [row] = await execute<DeliveryRow>(
    db,
    sql`select d.id, d.tenant_id, d.status, d.attempts, e.id as endpoint_id, e.url, e.enabled,
               ev.type as event_type, ev.data as event_data, ev.occurred_at,
               cur.key_id as cur_key_id, cur.nonce as cur_nonce, cur.ciphertext as cur_ciphertext,
               prev.key_id as prev_key_id, prev.nonce as prev_nonce, prev.ciphertext as prev_ciphertext
        from webhook_deliveries d
        join webhook_endpoints e on e.id = d.endpoint_id
        join webhook_events ev on ev.id = d.event_id
        left join tenant_secrets cur on cur.tenant_id = d.tenant_id and cur.name = 'webhooks.' || e.id || '.current'
        left join tenant_secrets prev on prev.tenant_id = d.tenant_id and prev.name = 'webhooks.' || e.id || '.previous'
          and e.previous_secret_expires_at > ${nowText}::timestamptz
        where d.id = ${payload.deliveryId}`,
  );
  // gone with its endpoint, finished, or this attempt already recorded by an earlier run
  if (row?.status !== "pending" || row.attempts >= payload.attempt) return "skipped";
  const settings = deps.config.settings.Webhooks;
  if (!row.enabled && row.event_type !== "webhook.test") {
    await execute(
      db,
      sql`update webhook_deliveries
          set status = 'failed', last_error_class = 'endpoint_disabled', next_attempt_at = null, updated_at = ${nowText}::timestamptz
          where id = ${row.id} and status = 'pending'`,
    );
    return "skipped";
  }
  const sealed = (keyId: string | null, nonce: string | null, ciphertext: string | null) =>
    keyId && nonce && ciphertext ? { keyId, nonce, ciphertext } : null;
  const secrets = openSigningSecrets(
    deps,
    { id: row.endpoint_id, tenantId: row.tenant_id },
    {
      current: sealed(row.cur_key_id, row.cur_nonce, row.cur_ciphertext),
      previous: sealed(row.prev_key_id, row.prev_nonce, row.prev_ciphertext),
    },
  );
  const body = deliveryBody(row.event_type, toDate(row.occurred_at), row.event_data);
  const timestamp = Math.floor(deps.clock.now().getTime() / 1000);
  const result = await sendDelivery({
    url: row.url,
    headers: signedHeaders(secrets, messageId(row.id), timestamp, body),
    body,
    timeoutMs: settings.TimeoutSeconds * 1000,
    maxResponseBytes: MAX_RESPONSE_BYTES,
    policy: destinationPolicy(deps),
    signal: job?.signal,
  });
  // stopped by the job loop (shutdown, or the lease about to end): not the receiver's failure, so
  // nothing is recorded and the job runs this attempt again (the receiver may see it twice, same id)
  if (job?.signal.aborted) throw job.signal.reason ?? new Error("the delivery attempt was stopped");
  const ok = result.errorClass === null;
  const m = deps.telemetry.instruments;
  m.webhookAttempts.add(1, {
    outcome: ok ? "succeeded" : "failed",
    "plinth.webhook.error_class": result.errorClass ?? "none",
  });
  m.webhookAttemptDuration.record(result.durationMs / 1000, { outcome: ok ? "succeeded" : "failed" });
  if (ok) {
    // a success is one statement (atomic on its own): the attempt, the delivery, the streak's end;
    // an attempt another run recorded first (a conflict) changes nothing
    const doneText = deps.clock.now().toISOString();
    await execute(
      db,
      sql`with attempt as (
            insert into webhook_delivery_attempts (delivery_id, attempt, status_code, duration_ms, error_class, attempted_at)
            values (${row.id}, ${payload.attempt}, ${result.statusCode}, ${result.durationMs}, null, ${doneText}::timestamptz)
            on conflict (delivery_id, attempt) do nothing
            returning delivery_id
          ),
          delivery as (
            update webhook_deliveries
            set status = 'succeeded', attempts = ${payload.attempt}, last_status_code = ${result.statusCode},
                last_error_class = null, next_attempt_at = null, updated_at = ${doneText}::timestamptz
            where id in (select delivery_id from attempt)
            returning endpoint_id
          )
          update webhook_endpoints set failing_since = null
          where id in (select endpoint_id from delivery) and failing_since is not null`,
    );
    return "succeeded";
  }
  await db.transaction(async (tx) => {
    const now = deps.clock.now();
    const nowText = now.toISOString();
    const inserted = await execute(
      tx,
      sql`insert into webhook_delivery_attempts (delivery_id, attempt, status_code, duration_ms, error_class, attempted_at)
          values (${row.id}, ${payload.attempt}, ${result.statusCode}, ${result.durationMs}, ${result.errorClass}, ${nowText}::timestamptz)
          on conflict (delivery_id, attempt) do nothing
          returning id`,
    );
    if (inserted.length === 0) return; // another run of this attempt recorded it first
    const delay = settings.RetrySeconds[payload.attempt - 1];
    const next = delay === undefined ? null : new Date(now.getTime() + delay * 1000);
    await execute(
      tx,
      sql`update webhook_deliveries
          set status = ${next ? "pending" : "failed"}, attempts = ${payload.attempt},
              last_status_code = ${result.statusCode}, last_error_class = ${result.errorClass},
              next_attempt_at = ${next ? next.toISOString() : null}::timestamptz, updated_at = ${nowText}::timestamptz
          where id = ${row.id}`,
    );
    if (next) await enqueueAttempt(deps, tx, row.tenant_id, row.id, payload.attempt + 1, next);
    await noteFailure(deps, tx, row, now);
  });
  return "failed";
}

async function enqueueAttempt(
  deps: Pick<Deps, "clock" | "config">,
  tx: Executor,
  tenantId: string,
  deliveryId: string,
  attempt: number,
  runAfter?: Date,
): Promise<void> {
  await enqueue(
    tx,
    enqueueContext(deps),
    deliverJob,
    { deliveryId, attempt },
    {
      tenantId,
      runAfter,
      dedupKey: deliveryDedupKey(deliveryId, attempt),
      maxAttempts: DELIVER_JOB_ATTEMPTS,
    },
  );
}

/** Starts the endpoint's failure streak, or disables it once the streak is `Webhooks:DisableAfterDays` long. */
async function noteFailure(deps: DeliveryDeps, tx: Executor, row: DeliveryRow, now: Date): Promise<void> {
  const days = deps.config.settings.Webhooks.DisableAfterDays;
  const nowText = now.toISOString();
  const cutoff = new Date(now.getTime() - days * DAY_MS).toISOString();
  const [endpoint] = await execute<{ id: string; url: string; failing_since: string | Date }>(
    tx,
    sql`update webhook_endpoints
        set failing_since = coalesce(failing_since, ${nowText}::timestamptz),
            enabled = case when failing_since <= ${cutoff}::timestamptz then false else enabled end,
            disabled_at = case when failing_since <= ${cutoff}::timestamptz and enabled then ${nowText}::timestamptz else disabled_at end,
            disabled_reason = case when failing_since <= ${cutoff}::timestamptz and enabled
              then ${`every attempt failed for ${days} days`} else disabled_reason end
        where id = ${row.endpoint_id}
        returning id, url, failing_since, (failing_since <= ${cutoff}::timestamptz and disabled_at = ${nowText}::timestamptz) as just_disabled`,
  );
  const disabled = endpoint as ({ just_disabled?: boolean } & typeof endpoint) | undefined;
  if (!disabled?.just_disabled) return;
  await recordAudit(tx, systemCtx("webhooks", row.tenant_id), {
    action: "webhook_endpoint.updated",
    target: { type: "webhook_endpoint", id: row.endpoint_id },
    details: { status: "disabled", reason: `every attempt failed for ${days} days` },
  });
  deps.logger.warn("webhook endpoint disabled after failing", {
    tenantId: row.tenant_id,
    endpointId: row.endpoint_id,
    days,
  });
  await emitEvent(tx, enqueueContext(deps), {
    tenantId: row.tenant_id,
    type: "webhook.endpoint_disabled",
    data: {
      endpointId: row.endpoint_id,
      url: disabled.url,
      failingSince: toDate(disabled.failing_since).toISOString(),
      reason: `every attempt failed for ${days} days`,
    },
  });
}

/** The `webhooks.deliver` job with its handler, for the job registry of every process that runs jobs. */
export function deliveryJob(deps: DeliveryDeps): JobDefinition {
  return defineJob(
    DELIVER_KIND,
    deliverPayload,
    async (payload, job) => {
      await deliverAttempt(deps, payload, job);
    },
    { maxAttempts: DELIVER_JOB_ATTEMPTS },
  );
}

export const PRUNE_KIND = "webhooks.prune";
const PRUNE_BATCH = 5_000;

/**
 * Deletes events older than `Webhooks:LogRetentionDays` with nothing left to deliver, and their
 * deliveries and attempts with them (foreign keys cascade), in batches.
 */
export async function pruneDeliveryLog(deps: Pick<Deps, "database" | "clock" | "config">): Promise<number> {
  const cutoff = new Date(
    deps.clock.now().getTime() - deps.config.settings.Webhooks.LogRetentionDays * DAY_MS,
  );
  let total = 0;
  for (;;) {
    const rows = await execute(
      deps.database.db,
      sql`delete from webhook_events where id in (
            select ev.id from webhook_events ev
            where ev.occurred_at < ${cutoff.toISOString()}::timestamptz
              and not exists (select 1 from webhook_deliveries d where d.event_id = ev.id and d.status = 'pending')
            limit ${PRUNE_BATCH})
          returning id`,
    );
    total += rows.length;
    if (rows.length < PRUNE_BATCH) return total;
  }
}

/** The daily pruning job and its schedule (seeded by the schedules loop). */
export function pruneJob(deps: Pick<Deps, "database" | "clock" | "config" | "logger">): JobDefinition {
  return defineJob(PRUNE_KIND, z.object({}).passthrough(), async () => {
    const pruned = await pruneDeliveryLog(deps);
    if (pruned > 0) deps.logger.info("webhook delivery log pruned", { events: pruned });
  });
}
export const pruneSchedule = defineSchedule("webhooks.prune", { cron: "17 3 * * *", kind: PRUNE_KIND });

/** Webhooks' job kinds, for `createJobRegistry`. */
export function webhookJobs(deps: DeliveryDeps): JobDefinition[] {
  return [deliveryJob(deps), pruneJob(deps)];
}

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

const POSITION = /^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?[+-]\d{2}(?::\d{2})?)\|([0-9a-f-]{36})$/;
const cursorOf = (position: string) => Buffer.from(position).toString("base64url");
function positionOf(cursor: string): { createdAt: string; id: string } {
  const match = POSITION.exec(Buffer.from(cursor, "base64url").toString());
  if (!match?.[1] || !match[2])
    throw new AppError("validation_failed", "The cursor is not valid.", {
      fields: [{ path: "cursor", message: "pass a nextCursor this list returned" }],
    });
  return { createdAt: match[1], id: match[2] };
}

function viewQuery(where: ReturnType<typeof sql>, limit: number) {
  return sql`select d.id, d.endpoint_id, d.event_id, ev.type as event_type, d.status, d.attempts,
                    d.last_status_code, d.last_error_class, d.next_attempt_at, d.created_at,
                    d.created_at::text || '|' || d.id::text as position,
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
): Promise<{ items: DeliveryView[]; nextCursor: string | null }> {
  const db = deps.database.db;
  await assertEndpoint(db, ctx.tenantId, input.endpointId);
  const after = input.cursor ? positionOf(input.cursor) : null;
  const rows = await execute<ViewRow>(
    db,
    viewQuery(
      sql`d.tenant_id = ${ctx.tenantId} and d.endpoint_id = ${input.endpointId}
          ${after ? sql`and (d.created_at, d.id) < (${after.createdAt}::timestamptz, ${after.id}::uuid)` : sql``}`,
      input.limit + 1,
    ),
  );
  const more = rows.length > input.limit;
  const page = rows.slice(0, input.limit);
  const last = page.at(-1);
  return { items: page.map(deliveryView), nextCursor: more && last ? cursorOf(last.position) : null };
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
  const db = deps.database.db;
  await db.transaction(async (tx) => {
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
  });
  return deliveryOf(db, ctx, input.endpointId, input.deliveryId);
}

/** Sends again every failed delivery of the endpoint created at or after `since`. */
export async function replayFailedDeliveries(
  deps: Pick<Deps, "database" | "clock" | "config">,
  ctx: TenantCtx,
  input: { endpointId: string; since: Date },
): Promise<{ replayed: number }> {
  const db = deps.database.db;
  await assertEndpoint(db, ctx.tenantId, input.endpointId);
  return db.transaction(async (tx) => {
    const now = deps.clock.now().toISOString();
    const rows = await execute<{ id: string; attempts: number }>(
      tx,
      sql`update webhook_deliveries set status = 'pending', next_attempt_at = ${now}::timestamptz, updated_at = ${now}::timestamptz
          where tenant_id = ${ctx.tenantId} and endpoint_id = ${input.endpointId} and status = 'failed'
            and created_at >= ${input.since.toISOString()}::timestamptz
          returning id, attempts`,
    );
    for (const row of rows) await enqueueAttempt(deps, tx, ctx.tenantId, row.id, row.attempts + 1);
    return { replayed: rows.length };
  });
}
