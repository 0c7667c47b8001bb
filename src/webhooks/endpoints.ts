import { and, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { isoOrNull } from "../clock.ts";
import type { Ctx } from "../context.ts";
import type { Executor, Tx } from "../db/client.ts";
import { webhookEndpoints } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { webhookEventTypes } from "../events/outbox.ts";
import { type DataKeySource, openSealed } from "../security/tenant-data-keys.ts";
import type { TenantSecretKeyring } from "../security/tenant-secrets.ts";
import { isUuid } from "../tenancy/tenants.ts";
import { checkDestination, type DestinationPolicy, DestinationRefused } from "./destinations.ts";

export type WebhookDeps = Pick<
  Deps,
  "database" | "cache" | "clock" | "config" | "logger" | "tenantSecretKeyring" | "hostResolver"
>;
export type EndpointRow = typeof webhookEndpoints.$inferSelect;

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

export function endpointView(row: EndpointRow): WebhookEndpointView {
  return {
    id: row.id,
    tenantId: row.tenantId,
    url: row.url,
    description: row.description,
    events: row.events,
    enabled: row.enabled,
    disabledReason: row.disabledReason,
    disabledAt: isoOrNull(row.disabledAt),
    failingSince: isoOrNull(row.failingSince),
    previousSecretExpiresAt: isoOrNull(row.previousSecretExpiresAt),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/**
 * Where an endpoint delivers, without what could be a credential, for everyone but the tenant that
 * owns it (platform administrators: the admin list and the console): the `user:password@` part is
 * left out and a query string shows as `?…` (receivers put tokens there). Scheme, host, port and
 * path stay, so an operator can tell endpoints apart.
 */
export function redactedDestination(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}${u.search ? "?…" : ""}`;
  } catch {
    return "(not a URL)";
  }
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
    trustedCa: deps.config.webhookTrustedCa,
  };
}

export function keyring(deps: Pick<WebhookDeps, "tenantSecretKeyring">): TenantSecretKeyring {
  if (!deps.tenantSecretKeyring)
    throw new AppError(
      "unavailable",
      "Webhook signing secrets need Security:TenantSecrets, which is not configured.",
    );
  return deps.tenantSecretKeyring;
}

/** An endpoint URL as the audit log keeps it: scheme, host and port (a path may carry a token). */
export const urlOrigin = (url: string): string => new URL(url).origin;

export async function checkUrl(deps: WebhookDeps, url: string): Promise<string> {
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

export function checkEvents(events: string[]): string[] {
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

/** The tenant's endpoint (locked `for update` with `lock`); 404 when there is none. */
export async function findEndpointRow(
  db: Executor,
  tenantId: string,
  id: string,
  lock = false,
): Promise<EndpointRow> {
  if (!isUuid(id) || !isUuid(tenantId)) throw new AppError("not_found", "No such webhook endpoint.");
  const query = db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.tenantId, tenantId)));
  const [row] = lock ? await query.for("update") : await query;
  if (!row) throw new AppError("not_found", "No such webhook endpoint.");
  return row;
}

/** A sealed secret as `tenant_secrets` holds it (null: none). */
export type SealedRow = { keyId: string; nonce: string; ciphertext: string } | null;

/**
 * The secrets that sign a delivery, opened from the rows the delivery's own query read: the current
 * one, and the previous one while its overlap runs (the caller reads it only then).
 */
export async function openSigningSecrets(
  deps: Pick<WebhookDeps, "tenantSecretKeyring">,
  db: DataKeySource,
  endpoint: { id: string; tenantId: string },
  sealed: { current: SealedRow; previous: SealedRow },
): Promise<string[]> {
  const ring = keyring(deps);
  if (!sealed.current) throw new Error(`webhook endpoint ${endpoint.id} has no signing secret`);
  const open = (row: NonNullable<SealedRow>, which: "current" | "previous") =>
    openSealed(db, ring, { binding: endpoint.tenantId, name: secretName(endpoint.id, which), sealed: row });
  const secrets = [await open(sealed.current, "current")];
  if (sealed.previous) secrets.push(await open(sealed.previous, "previous"));
  return secrets;
}

/**
 * Writes a change of one endpoint (already found and locked) in the ctx's transaction, with its
 * `webhook_endpoint.updated` audit entry; returns the row as it now is.
 */
export async function writeEndpointChange(
  tx: Tx,
  ctx: Ctx,
  input: { id: string; set: Partial<EndpointRow>; details: Record<string, unknown> },
): Promise<EndpointRow> {
  const [updated] = await tx
    .update(webhookEndpoints)
    .set(input.set)
    .where(eq(webhookEndpoints.id, input.id))
    .returning();
  if (!updated) throw new Error("endpoint update returned no row");
  await recordAudit(tx, ctx, {
    action: "webhook_endpoint.updated",
    target: { type: "webhook_endpoint", id: input.id },
    details: input.details,
  });
  return updated;
}
