import { sql } from "drizzle-orm";
import type { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { systemCtx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import { withPlatformDatabase, withPlatformTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import {
  DELIVER_JOB_ATTEMPTS,
  deliverJob,
  type deliverPayload,
  deliveryDedupKey,
  emitEvent,
} from "../events/outbox.ts";
import { enqueue, enqueueContext } from "../jobs/enqueue.ts";
import { type JobContext, jobWorker } from "../jobs/registry.ts";
import { sendDelivery } from "./destinations.ts";
import { destinationPolicy, openSigningSecrets, type WebhookDeps } from "./endpoints.ts";
import { signedHeaders } from "./signing.ts";

/** At most this much of a receiver's answer is read; the rest is dropped. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
const DAY_MS = 86_400_000;

export type DeliveryDeps = WebhookDeps & Pick<Deps, "telemetry">;

/** The delivery loop's work is on the platform path: a job names its delivery, whose row names the tenant. */
const DELIVERY = systemCtx("webhooks");

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
  const nowText = deps.clock.now().toISOString();
  const row = await withPlatformDatabase(deps, DELIVERY, (db) =>
    deliveryToSend(db, payload.deliveryId, nowText),
  );
  // gone with its endpoint, finished, or this attempt already recorded by an earlier run
  if (row?.status !== "pending" || row.attempts >= payload.attempt) return "skipped";
  const settings = deps.config.settings.Webhooks;
  if (!row.enabled && row.event_type !== "webhook.test") {
    await withPlatformDatabase(deps, DELIVERY, (db) =>
      execute(
        db,
        sql`update webhook_deliveries
            set status = 'failed', last_error_class = 'endpoint_disabled', next_attempt_at = null, updated_at = ${nowText}::timestamptz
            where id = ${row.id} and status = 'pending'`,
      ),
    );
    return "skipped";
  }
  const sealed = (keyId: string | null, nonce: string | null, ciphertext: string | null) =>
    keyId && nonce && ciphertext ? { keyId, nonce, ciphertext } : null;
  const secrets = await openSigningSecrets(
    deps,
    // read only when this process has not unwrapped the tenant's data key yet
    (work) => withPlatformDatabase(deps, DELIVERY, work),
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
  if (ok) await recordSucceeded(deps, row, payload.attempt, result);
  else await recordFailed(deps, row, payload.attempt, result);
  return ok ? "succeeded" : "failed";
}

/** One round trip: the delivery, its endpoint and event, and the sealed secrets that sign it. */
async function deliveryToSend(
  db: Executor,
  deliveryId: string,
  nowText: string,
): Promise<DeliveryRow | undefined> {
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
        where d.id = ${deliveryId}`,
  );
  return row;
}

type SendResult = Awaited<ReturnType<typeof sendDelivery>>;

/**
 * A success is one statement (atomic on its own): the attempt, the delivery, the streak's end;
 * an attempt another run recorded first (a conflict) changes nothing.
 */
async function recordSucceeded(deps: DeliveryDeps, row: DeliveryRow, attempt: number, result: SendResult) {
  const doneText = deps.clock.now().toISOString();
  await withPlatformDatabase(deps, DELIVERY, (db) =>
    execute(
      db,
      sql`with attempt as (
          insert into webhook_delivery_attempts (delivery_id, attempt, status_code, duration_ms, error_class, attempted_at)
          values (${row.id}, ${attempt}, ${result.statusCode}, ${result.durationMs}, null, ${doneText}::timestamptz)
          on conflict (delivery_id, attempt) do nothing
          returning delivery_id
        ),
        delivery as (
          update webhook_deliveries
          set status = 'succeeded', attempts = ${attempt}, last_status_code = ${result.statusCode},
              last_error_class = null, next_attempt_at = null, updated_at = ${doneText}::timestamptz
          where id in (select delivery_id from attempt)
          returning endpoint_id
        )
        update webhook_endpoints set failing_since = null
        where id in (select endpoint_id from delivery) and failing_since is not null`,
    ),
  );
}

/** A failed attempt, the next one enqueued (or the delivery given up) and the endpoint's streak, together. */
async function recordFailed(deps: DeliveryDeps, row: DeliveryRow, attempt: number, result: SendResult) {
  await withPlatformTransaction(deps, DELIVERY, async (tx) => {
    const now = deps.clock.now();
    const nowText = now.toISOString();
    const inserted = await execute(
      tx,
      sql`insert into webhook_delivery_attempts (delivery_id, attempt, status_code, duration_ms, error_class, attempted_at)
          values (${row.id}, ${attempt}, ${result.statusCode}, ${result.durationMs}, ${result.errorClass}, ${nowText}::timestamptz)
          on conflict (delivery_id, attempt) do nothing
          returning id`,
    );
    if (inserted.length === 0) return; // another run of this attempt recorded it first
    const delay = deps.config.settings.Webhooks.RetrySeconds[attempt - 1];
    const next = delay === undefined ? null : new Date(now.getTime() + delay * 1000);
    await execute(
      tx,
      sql`update webhook_deliveries
          set status = ${next ? "pending" : "failed"}, attempts = ${attempt},
              last_status_code = ${result.statusCode}, last_error_class = ${result.errorClass},
              next_attempt_at = ${next ? next.toISOString() : null}::timestamptz, updated_at = ${nowText}::timestamptz
          where id = ${row.id}`,
    );
    if (next) await enqueueAttempt(deps, tx, row.tenant_id, row.id, attempt + 1, next);
    await noteFailure(deps, tx, row, now);
  });
}

/** Enqueues attempt `attempt` of a delivery (its dedup key makes a second enqueue a no-op). */
export async function enqueueAttempt(
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

/** The handler of the `webhooks.deliver` kind (declared in src/events/outbox.ts, which enqueues it). */
export const deliverWorker = jobWorker(deliverJob, async (deps: DeliveryDeps, payload, job) => {
  await deliverAttempt(deps, payload, job);
});
