import { sql } from "drizzle-orm";
import type { Actor, Ctx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import { type DatabaseDeps, withTenantOrPlatformTransaction } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { createRedactor } from "../redact.ts";
import type { AuditAction } from "./actions.ts";
import { auditRowHash, chainOf, GENESIS_HASH } from "./chain.ts";
import type { SuppressionLimit } from "./suppressions.ts";

/** An action the log records: src/audit/actions.ts and the areas describe each (docs/audit.md's table). */
export type { AuditAction };

export const AUDIT_OUTCOMES = ["success", "failure", "denied"] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

/**
 * The detail fields a row may carry (docs/audit.md); any other key is dropped, and so is one whose
 * name reads as a secret (src/redact.ts). Values are scalars or lists of strings, strings cut at 300.
 */
export const AUDIT_DETAIL_KEYS = new Set([
  "dataKeyDestroyed",
  "masterSealedValues",
  "method",
  "check",
  "email",
  "phone",
  "reason",
  "role",
  "name",
  "kind",
  "provider",
  "status",
  "hostname",
  "event",
  "from",
  "to",
  "plan",
  "feature",
  "value",
  "jobKind",
  "attempts",
  "code",
  "scopes",
  "prefix",
  "expiresAt",
  "expiresInHours",
  "first",
  "graceSeconds",
  "url",
  "events",
  "httpMethod",
  "path",
  "count",
  "sessions",
  "clientRequestId",
  "userId",
  "impersonatorId",
  "filter",
  "changed",
  "privateIdentities",
  "emailSignIn",
  "counts",
  "tenantId",
  "requestedBy",
  "graceDays",
  "scheduledFor",
  "secrets",
  // audit.rows_suppressed: the action whose rows were dropped, the limit that was full, its size
  "action",
  "limit",
  "perMinute",
  // single sign-on (src/http/routes/email-domains-actions.ts, sso-connections-actions.ts)
  "domain",
  "movedFrom",
  "enforced",
  "breakGlassUserId",
  "connectionId",
  "type",
  "issuer",
  "fields",
]);

export interface AuditInput {
  action: AuditAction;
  target?: { type: string; id: string | null } | null;
  /** `success` unless said otherwise. */
  outcome?: AuditOutcome;
  details?: Record<string, unknown>;
  /** The chain to write in when it is not the ctx's tenant (a platform admin creating a tenant). */
  tenantId?: string | null;
  /** When the action happened; the database's clock when absent (tests and imports pass their own). */
  at?: Date;
}

// only the name rules and the bearer / URL-credential patterns: details never carry a configured secret
const redactor = createRedactor([]);
const MAX_STRING = 300;
const MAX_LIST = 50;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const cut = (value: string): string => {
  // jsonb refuses NUL and lone surrogates: a stray one must not fail the change being recorded
  const text = redactor.text(value.replace(LONE_SURROGATE, "\ufffd").replaceAll("\u0000", ""));
  return text.length > MAX_STRING ? `${cutAt(text, MAX_STRING)}…` : text;
};

/** The first `max` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair. */
export function cutAt(text: string, max: number): string {
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** A flat record of counts (a deletion certificate's rows per table): names cut, numbers only, at most 500. */
function countsOf(value: Record<string, unknown>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, count] of Object.entries(value).slice(0, 500))
    if (typeof count === "number" && Number.isFinite(count)) out[cut(name)] = count;
  return out;
}

/** The allow-listed, redacted copy of a details object that `recordAudit` stores. */
export function auditDetails(details: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!details) return out;
  for (const [key, value] of Object.entries(details)) {
    if (!AUDIT_DETAIL_KEYS.has(key) || redactor.isSecretName(key) || value === undefined) continue;
    if (value === null || typeof value === "boolean") out[key] = value;
    else if (typeof value === "number") out[key] = Number.isFinite(value) ? value : null;
    else if (typeof value === "string") out[key] = cut(value);
    else if (value instanceof Date) out[key] = value.toISOString();
    else if (Array.isArray(value))
      out[key] = value
        .slice(0, MAX_LIST)
        .map((item) => cut(String(item)))
        .sort();
    else if (typeof value === "object") out[key] = countsOf(value as Record<string, unknown>);
  }
  return out;
}

/** The actor columns of an event: its type and id (user id, API key id, component name). */
export function auditActorOf(actor: Actor): { type: string; id: string | null } {
  switch (actor.type) {
    case "user":
      return { type: "user", id: actor.userId };
    case "system":
      return { type: "system", id: actor.name };
    case "anonymous":
      return { type: "anonymous", id: null };
    default: {
      // an actor variant added later (API keys): its type, and its key id where it has one
      const other = actor as { type: string; keyId?: string };
      return { type: other.type, id: other.keyId ?? null };
    }
  }
}

/**
 * Appends one event to its tenant's chain, inside the caller's transaction `executor` (a rolled
 * back change leaves no row). The chain's row in `audit_chains` is locked first (an upsert takes
 * the row lock and holds it to commit), so concurrent writers of one chain queue there and never
 * fork it; writers of other tenants do not wait. Two statements: lock + head + id, then the row and
 * the new head.
 */
export async function recordAudit(
  executor: Executor,
  ctx: Ctx,
  input: AuditInput,
): Promise<{ id: number; hash: string }> {
  // lower case, as PostgreSQL gives a uuid back: an id from a path may come in upper case
  const tenantId = (input.tenantId === undefined ? ctx.tenantId : input.tenantId)?.toLowerCase() ?? null;
  const chain = chainOf(tenantId);
  const [head] = await execute<{ head_hash: string; id: string; now_ms: string }>(
    executor,
    sql`insert into audit_chains (chain, head_hash, start_hash) values (${chain}, ${GENESIS_HASH}, ${GENESIS_HASH})
        on conflict (chain) do update set head_hash = audit_chains.head_hash
        returning head_hash, nextval('audit_events_id_seq')::text as id,
          floor(extract(epoch from clock_timestamp()) * 1000)::bigint::text as now_ms`,
  );
  if (!head) throw new Error("audit chain lock returned nothing");
  const actor = auditActorOf(ctx.actor);
  // an impersonated session's every action names both: the user (actor) and the admin acting as them
  const impersonatorId = ctx.actor.type === "user" ? ctx.actor.impersonatorId : undefined;
  const row = {
    id: Number(head.id),
    tenantId,
    occurredAt: input.at ?? new Date(Number(head.now_ms)),
    actorType: actor.type,
    actorId: actor.id,
    action: input.action,
    targetType: input.target?.type ?? null,
    targetId: input.target?.id ?? null,
    outcome: input.outcome ?? "success",
    clientAddress: ctx.clientIp ?? null,
    userAgent:
      ctx.userAgent === undefined
        ? null
        : cutAt(ctx.userAgent, 512).replaceAll("\u0000", "").replace(LONE_SURROGATE, "\ufffd"),
    requestId: ctx.requestId ?? null,
    details: auditDetails({
      ...input.details,
      ...(ctx.clientRequestId ? { clientRequestId: ctx.clientRequestId } : {}),
      ...(impersonatorId ? { impersonatorId } : {}),
    }),
    prevHash: head.head_hash,
  };
  const hash = auditRowHash(row);
  await execute(
    executor,
    sql`with inserted as (
          insert into audit_events (id, tenant_id, occurred_at, actor_type, actor_id, action, target_type, target_id,
            outcome, client_address, user_agent, request_id, details, prev_hash, hash)
          values (${row.id}, ${row.tenantId}, ${row.occurredAt.toISOString()}::timestamptz, ${row.actorType}, ${row.actorId},
            ${row.action}, ${row.targetType}, ${row.targetId}, ${row.outcome}, ${row.clientAddress}, ${row.userAgent},
            ${row.requestId}, ${JSON.stringify(row.details)}::jsonb, ${row.prevHash}, ${hash})
          returning id)
        update audit_chains set head_id = (select id from inserted), head_hash = ${hash}, updated_at = now()
        where chain = ${chain}`,
  );
  return { id: row.id, hash };
}

export type LimitedAuditDeps = DatabaseDeps &
  Pick<Deps, "counters" | "clock" | "logger" | "config" | "telemetry" | "auditSuppressions">;

/** The failure limiter's window: its limits are per minute. */
const LIMIT_WINDOW_MS = 60_000;

/**
 * Records an event nobody's change carries (a failed sign-in, a refused authorization) in its own
 * transaction, at most `Audit:FailuresPerMinute` per tenant and client address and
 * `Audit:FailuresPerTenantPerMinute` per tenant (the rate-limit counters: cache or database), so a
 * flood cannot fill the table. Returns whether a row was written. A row over a limit is dropped but
 * never silently (`suppressRow`): counted in `plinth.audit.rows_suppressed`, logged once a window per
 * key, and marked in the chain by an `audit.rows_suppressed` row. Never throws: the refusal the
 * caller is answering matters more than its record: a failure to write is logged and counted in
 * `plinth.audit.write_failures` (alert `PlinthAuditWriteFailures`, docs/audit.md).
 */
export async function recordAuditLimited(
  deps: LimitedAuditDeps,
  ctx: Ctx,
  input: AuditInput,
): Promise<boolean> {
  const settings = deps.config.settings.Audit;
  const tenantId = (input.tenantId === undefined ? ctx.tenantId : input.tenantId)?.toLowerCase() ?? null;
  const chain = chainOf(tenantId);
  const nowMs = deps.clock.now().getTime();
  const dropped = { deps, ctx, input, tenantId, nowMs };
  try {
    const [perAddress] = await deps.counters.rate(
      `audit:${chain}:${ctx.clientIp ?? "unknown"}`,
      settings.FailuresPerMinute,
      LIMIT_WINDOW_MS,
      nowMs,
      1,
    );
    if (!perAddress?.allowed) {
      await suppressRow({ ...dropped, limit: "address" });
      return false;
    }
    const [perTenant] = await deps.counters.rate(
      `audit:${chain}`,
      settings.FailuresPerTenantPerMinute,
      LIMIT_WINDOW_MS,
      nowMs,
      1,
    );
    if (!perTenant?.allowed) {
      await suppressRow({ ...dropped, limit: "tenant" });
      return false;
    }
    // its own transaction even inside another: the refusal's record outlives a rolled-back change
    await withTenantOrPlatformTransaction(deps, ctx, tenantId, (tx) => recordAudit(tx, ctx, input));
    return true;
  } catch (error) {
    deps.telemetry.instruments.auditWriteFailures.add(1, { "plinth.audit.action": input.action });
    deps.logger.warn("audit event not recorded", { action: input.action, requestId: ctx.requestId, error });
    return false;
  }
}

interface DroppedRow {
  deps: LimitedAuditDeps;
  ctx: Ctx;
  input: AuditInput;
  tenantId: string | null;
  nowMs: number;
  limit: SuppressionLimit;
}

/** The limiter's key of a limit: the chain and the client address, or the chain alone. */
function limitKeyOf(dropped: Pick<DroppedRow, "ctx" | "tenantId">, limit: SuppressionLimit): string {
  const chain = chainOf(dropped.tenantId);
  return limit === "address" ? `audit:${chain}:${dropped.ctx.clientIp ?? "unknown"}` : `audit:${chain}`;
}

/**
 * A row the limiter dropped: counted (`plinth.audit.rows_suppressed`, by action and limit), logged at
 * most once a window per key and action (the rows dropped since the last line: no address, as no
 * other log line carries one), and marked in the chain (`recordSuppression`).
 */
async function suppressRow(dropped: DroppedRow): Promise<void> {
  const { deps, input, limit } = dropped;
  deps.telemetry.instruments.auditRowsSuppressed.add(1, {
    "plinth.audit.action": input.action,
    "plinth.audit.limit": limit,
  });
  const line = deps.auditSuppressions.dropped(
    `${limitKeyOf(dropped, limit)}|${input.action}`,
    dropped.nowMs,
    LIMIT_WINDOW_MS,
  );
  if (line)
    deps.logger.warn("audit rows suppressed", {
      action: input.action,
      limit,
      tenantId: dropped.tenantId,
      suppressed: line.suppressed,
      ...(line.sinceMs === null ? {} : { sinceSeconds: Math.round(line.sinceMs / 1000) }),
      windowSeconds: LIMIT_WINDOW_MS / 1000,
      requestId: dropped.ctx.requestId,
    });
  await recordSuppression(dropped);
}

/**
 * Whether this is the first dropped row of `limit`'s key and the action in the window, across
 * processes: this process asks at most once a window, the shared bucket grants one a window.
 */
async function firstDropInWindow(dropped: DroppedRow, limit: SuppressionLimit): Promise<boolean> {
  const key = `${limitKeyOf(dropped, limit)}|${dropped.input.action}`;
  if (!dropped.deps.auditSuppressions.claimMarker(key, dropped.nowMs, LIMIT_WINDOW_MS)) return false;
  const [claim] = await dropped.deps.counters.rate(
    `audit-suppressed:${key}`,
    1,
    LIMIT_WINDOW_MS,
    dropped.nowMs,
    1,
  );
  return claim?.allowed === true;
}

/**
 * The first dropped row of a key and action in a window becomes one `audit.rows_suppressed` row in
 * the chain (the dropped event's actor, address and request id; details: the action, the limit, its
 * size), so the log itself shows where it is incomplete. Those of single addresses are capped per
 * chain and action at the tenant's limit a minute, apart from the rows the limit counts, so many
 * addresses cannot fill the chain with them and they take no permit from the events themselves.
 * Its own failure is counted as a write failure of `audit.rows_suppressed`.
 */
async function recordSuppression(dropped: DroppedRow): Promise<void> {
  const { deps, ctx, input, tenantId, nowMs, limit } = dropped;
  const settings = deps.config.settings.Audit;
  try {
    if (!(await firstDropInWindow(dropped, limit))) return;
    if (limit === "address") {
      const [cap] = await deps.counters.rate(
        `audit-suppressed-addresses:${chainOf(tenantId)}|${input.action}`,
        settings.FailuresPerTenantPerMinute,
        LIMIT_WINDOW_MS,
        nowMs,
        1,
      );
      if (!cap?.allowed) return;
    }
    const perMinute = limit === "address" ? settings.FailuresPerMinute : settings.FailuresPerTenantPerMinute;
    await withTenantOrPlatformTransaction(deps, ctx, tenantId, (tx) =>
      recordAudit(tx, ctx, {
        action: "audit.rows_suppressed",
        tenantId,
        outcome: input.outcome,
        details: { action: input.action, limit, perMinute },
      }),
    );
  } catch (error) {
    deps.telemetry.instruments.auditWriteFailures.add(1, { "plinth.audit.action": "audit.rows_suppressed" });
    deps.logger.warn("audit event not recorded", {
      action: "audit.rows_suppressed",
      requestId: ctx.requestId,
      error,
    });
  }
}
