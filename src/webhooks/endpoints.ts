import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { tenantSecrets, tenants, webhookEndpoints } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { emitEvent, webhookEventTypes } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import { readTenantSecret, writeTenantSecret } from "../providers/secrets.ts";
import { openSecret, type TenantSecretKeyring } from "../security/tenant-secrets.ts";
import { getTenant, isUuid } from "../tenancy/tenants.ts";
import { recordUsage } from "../usage/ledger.ts";
import { checkDestination, type DestinationPolicy, DestinationRefused } from "./destinations.ts";
import { newSigningSecret } from "./signing.ts";

export type WebhookDeps = Pick<
  Deps,
  "database" | "cache" | "clock" | "config" | "logger" | "tenantSecretKeyring" | "hostResolver"
>;
type EndpointRow = typeof webhookEndpoints.$inferSelect;

/** How long the previous secret keeps signing beside the new one after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;
const MAX_URL = 2_000;

export interface WebhookEndpointView {
  id: string;
  tenantId: string;
  url: string;
  description: string;
  events: string[];
  enabled: boolean;
  disabledReason: string | null;
  disabledAt: string | null;
  failingSince: string | null;
  /** While set and in the future, deliveries carry two signatures (the previous secret's too). */
  previousSecretExpiresAt: string | null;
  createdAt: string;
  updatedAt: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function endpointView(row: EndpointRow): WebhookEndpointView {
  return {
    id: row.id,
    tenantId: row.tenantId,
    url: row.url,
    description: row.description,
    events: row.events,
    enabled: row.enabled,
    disabledReason: row.disabledReason,
    disabledAt: iso(row.disabledAt),
    failingSince: iso(row.failingSince),
    previousSecretExpiresAt: iso(row.previousSecretExpiresAt),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** Secret names in `tenant_secrets`: safe to log, never the values. */
export const secretName = (endpointId: string, which: "current" | "previous") =>
  `webhooks.${endpointId}.${which}`;

/** The destination policy of this process: https only in Production, private addresses per setting. */
export function destinationPolicy(deps: Pick<WebhookDeps, "config" | "hostResolver">): DestinationPolicy {
  return {
    httpsOnly: deps.config.environment === "Production",
    allowPrivate: deps.config.settings.Webhooks.AllowPrivateDestinations,
    resolve: deps.hostResolver,
  };
}

function keyring(deps: Pick<WebhookDeps, "tenantSecretKeyring">): TenantSecretKeyring {
  if (!deps.tenantSecretKeyring)
    throw new AppError(
      "unavailable",
      "Webhook signing secrets need Security:TenantSecrets, which is not configured.",
    );
  return deps.tenantSecretKeyring;
}

/** An endpoint URL as the audit log keeps it: scheme, host and port (a path may carry a token). */
const urlOrigin = (url: string): string => new URL(url).origin;

async function checkUrl(deps: WebhookDeps, url: string): Promise<string> {
  if (url.length > MAX_URL)
    throw new AppError("validation_failed", "The URL is too long.", {
      fields: [{ path: "url", message: `at most ${MAX_URL} characters` }],
    });
  try {
    return (await checkDestination(url, destinationPolicy(deps))).toString();
  } catch (error) {
    if (!(error instanceof DestinationRefused)) throw error;
    throw new AppError("validation_failed", `The destination is refused: ${error.message}.`, {
      fields: [{ path: "url", message: `${error.rule}: ${error.message}` }],
    });
  }
}

function checkEvents(events: string[]): string[] {
  const known = new Set<string>([...webhookEventTypes, "*"]);
  const unknown = events.filter((e) => !known.has(e));
  if (events.length === 0 || unknown.length > 0)
    throw new AppError("validation_failed", "The event types are not valid.", {
      fields: [
        {
          path: "events",
          message:
            events.length === 0
              ? "name at least one event type, or *"
              : `unknown event types: ${unknown.join(", ")}`,
        },
      ],
    });
  return [...new Set(events)].sort();
}

/** `webhook_endpoints` usage (all-time): +1 per endpoint added, −1 per endpoint removed. */
async function countEndpoint(
  deps: WebhookDeps,
  tx: Executor,
  tenantId: string,
  id: string,
  quantity: 1 | -1,
) {
  await recordUsage(
    deps,
    {
      tenantId,
      feature: "webhook_endpoints",
      quantity,
      idempotencyKey: `webhook_endpoints:${quantity > 0 ? "added" : "removed"}:${id}`,
    },
    tx,
  );
}

/**
 * Registers an endpoint and its signing secret (returned only here and on rotation). The URL is
 * checked against the destination rules (400 naming the rule); the plan's `webhook_endpoints`
 * limit holds under the tenant's row lock (402 when the plan has none, 403 at the limit).
 */
export async function createWebhookEndpoint(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { url: string; events: string[]; description?: string },
): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
  const { tenantId } = ctx;
  const ring = keyring(deps);
  const events = checkEvents(input.events);
  const url = await checkUrl(deps, input.url);
  const { limit } = await assertFeature(deps, tenantId, "webhook_endpoints", 1);
  await getTenant(deps, ctx, { tenantId });
  const secret = newSigningSecret();
  const now = deps.clock.now();
  const row = await deps.database.db.transaction(async (tx) => {
    await tx.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).for("update");
    if (limit !== null) {
      const [held] = await tx
        .select({ n: sql<number>`count(*)::int` })
        .from(webhookEndpoints)
        .where(eq(webhookEndpoints.tenantId, tenantId));
      if ((held?.n ?? 0) >= limit)
        throw new AppError(
          "usage_limit_reached",
          `The limit of "webhook_endpoints" (${limit} endpoints) is reached.`,
        );
    }
    const [inserted] = await tx
      .insert(webhookEndpoints)
      .values({ tenantId, url, events, description: input.description ?? "", createdAt: now, updatedAt: now })
      .returning();
    if (!inserted) throw new Error("endpoint insert returned no row");
    await writeTenantSecret(tx, ring, tenantId, {
      name: secretName(inserted.id, "current"),
      value: secret,
      now,
    });
    await countEndpoint(deps, tx, tenantId, inserted.id, 1);
    await recordAudit(tx, ctx, {
      action: "webhook_endpoint.created",
      target: { type: "webhook_endpoint", id: inserted.id },
      details: { url: urlOrigin(inserted.url), events: inserted.events },
    });
    return inserted;
  });
  deps.logger.info("webhook endpoint added", { tenantId, endpointId: row.id });
  return { endpoint: endpointView(row), secret };
}

async function endpointRow(db: Executor, tenantId: string, id: string, lock = false): Promise<EndpointRow> {
  if (!isUuid(id) || !isUuid(tenantId)) throw new AppError("not_found", "No such webhook endpoint.");
  const query = db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.tenantId, tenantId)));
  const [row] = lock ? await query.for("update") : await query;
  if (!row) throw new AppError("not_found", "No such webhook endpoint.");
  return row;
}

/** The tenant's endpoints, newest first (no secrets). */
export async function listWebhookEndpoints(
  deps: Pick<WebhookDeps, "database">,
  ctx: TenantCtx,
): Promise<WebhookEndpointView[]> {
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const rows = await deps.database.db
    .select()
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.tenantId, ctx.tenantId))
    .orderBy(desc(webhookEndpoints.createdAt), webhookEndpoints.id);
  return rows.map(endpointView);
}

export async function getWebhookEndpoint(
  deps: Pick<WebhookDeps, "database">,
  ctx: TenantCtx,
  input: { id: string },
): Promise<WebhookEndpointView> {
  return endpointView(await endpointRow(deps.database.db, ctx.tenantId, input.id));
}

/** Changes the URL (checked again), the event types, the description or `enabled` (enabling clears the failure streak). */
export async function updateWebhookEndpoint(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string; url?: string; events?: string[]; enabled?: boolean; description?: string },
): Promise<WebhookEndpointView> {
  const url = input.url === undefined ? undefined : await checkUrl(deps, input.url);
  const events = input.events === undefined ? undefined : checkEvents(input.events);
  const now = deps.clock.now();
  const row = await deps.database.db.transaction(async (tx) => {
    const current = await endpointRow(tx, ctx.tenantId, input.id, true);
    const enabling = input.enabled === true && !current.enabled;
    const [updated] = await tx
      .update(webhookEndpoints)
      .set({
        ...(url !== undefined ? { url } : {}),
        ...(events !== undefined ? { events } : {}),
        ...(input.description !== undefined ? { description: input.description } : {}),
        ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
        ...(enabling ? { disabledReason: null, disabledAt: null, failingSince: null } : {}),
        ...(input.enabled === false && current.enabled ? { disabledAt: now, disabledReason: null } : {}),
        updatedAt: now,
      })
      .where(eq(webhookEndpoints.id, current.id))
      .returning();
    if (!updated) throw new Error("endpoint update returned no row");
    await recordAudit(tx, ctx, {
      action: "webhook_endpoint.updated",
      target: { type: "webhook_endpoint", id: current.id },
      details: {
        url: url === undefined ? undefined : urlOrigin(url),
        events,
        status: input.enabled === undefined ? undefined : input.enabled ? "enabled" : "disabled",
      },
    });
    return updated;
  });
  return endpointView(row);
}

/** Removes the endpoint, its secrets and its delivery log; pending attempts find nothing and stop. */
export async function deleteWebhookEndpoint(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<void> {
  await deps.database.db.transaction(async (tx) => {
    const row = await endpointRow(tx, ctx.tenantId, input.id, true);
    await tx.delete(webhookEndpoints).where(eq(webhookEndpoints.id, row.id));
    await tx
      .delete(tenantSecrets)
      .where(
        and(
          eq(tenantSecrets.tenantId, ctx.tenantId),
          inArray(tenantSecrets.name, [secretName(row.id, "current"), secretName(row.id, "previous")]),
        ),
      );
    await countEndpoint(deps, tx, ctx.tenantId, row.id, -1);
    await recordAudit(tx, ctx, {
      action: "webhook_endpoint.deleted",
      target: { type: "webhook_endpoint", id: row.id },
      details: { url: urlOrigin(row.url) },
    });
  });
  deps.logger.info("webhook endpoint removed", { tenantId: ctx.tenantId, endpointId: input.id });
}

/**
 * A new signing secret (returned once); the previous one keeps signing beside it for 24 hours, so
 * receivers can switch without losing a delivery.
 */
export async function rotateWebhookSecret(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
  const secret = newSigningSecret();
  const now = deps.clock.now();
  const row = await deps.database.db.transaction(async (tx) => {
    const current = await endpointRow(tx, ctx.tenantId, input.id, true);
    const ring = keyring(deps);
    const old = await readTenantSecret(tx, ring, ctx.tenantId, secretName(current.id, "current"));
    if (old)
      await writeTenantSecret(tx, ring, ctx.tenantId, {
        name: secretName(current.id, "previous"),
        value: old,
        now,
      });
    await writeTenantSecret(tx, ring, ctx.tenantId, {
      name: secretName(current.id, "current"),
      value: secret,
      now,
    });
    const [updated] = await tx
      .update(webhookEndpoints)
      .set({ previousSecretExpiresAt: new Date(now.getTime() + ROTATION_OVERLAP_MS), updatedAt: now })
      .where(eq(webhookEndpoints.id, current.id))
      .returning();
    if (!updated) throw new Error("endpoint update returned no row");
    await recordAudit(tx, ctx, {
      action: "webhook_endpoint.updated",
      target: { type: "webhook_endpoint", id: current.id },
      details: { reason: "signing secret rotated" },
    });
    return updated;
  });
  deps.logger.info("webhook secret rotated", { tenantId: ctx.tenantId, endpointId: row.id });
  return { endpoint: endpointView(row), secret };
}

/** A sealed secret as `tenant_secrets` holds it (null: none). */
export type SealedRow = { keyId: string; nonce: string; ciphertext: string } | null;

/**
 * The secrets that sign a delivery, opened from the rows the delivery's own query read: the current
 * one, and the previous one while its overlap runs (the caller reads it only then).
 */
export function openSigningSecrets(
  deps: Pick<WebhookDeps, "tenantSecretKeyring">,
  endpoint: { id: string; tenantId: string },
  sealed: { current: SealedRow; previous: SealedRow },
): string[] {
  const ring = keyring(deps);
  if (!sealed.current) throw new Error(`webhook endpoint ${endpoint.id} has no signing secret`);
  const open = (row: NonNullable<SealedRow>, which: "current" | "previous") =>
    openSecret(ring, endpoint.tenantId, secretName(endpoint.id, which), row);
  const secrets = [open(sealed.current, "current")];
  if (sealed.previous) secrets.push(open(sealed.previous, "previous"));
  return secrets;
}

/** Sends a `webhook.test` event to this endpoint (whatever it subscribes to). */
export async function sendTestEvent(
  deps: WebhookDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<{ eventId: string; deliveryId: string }> {
  const row = await endpointRow(deps.database.db, ctx.tenantId, input.id);
  const { eventId, deliveryIds } = await deps.database.db.transaction((tx) =>
    emitEvent(
      tx,
      enqueueContext(deps),
      {
        tenantId: ctx.tenantId,
        type: "webhook.test",
        data: { endpointId: row.id, message: "A test event sent from Plinth." },
      },
      { only: row.id },
    ),
  );
  const [deliveryId] = deliveryIds;
  if (!deliveryId) throw new AppError("not_found", "No such webhook endpoint.");
  return { eventId, deliveryId };
}
