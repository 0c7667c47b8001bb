import { and, asc, desc, eq, lt, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Cache } from "../cache/port.ts";
import { invalidate, tenantFeaturesKey } from "../cache/read-through.ts";
import type { Clock } from "../clock.ts";
import type { Settings } from "../config/schema.ts";
import { actorUserId, type Ctx, systemCtx, type TenantCtx } from "../context.ts";
import type { Database, Executor, Tx } from "../db/client.ts";
import { plans, type SubscriptionStatus, subscriptionHistory, subscriptions } from "../db/schema/billing.ts";
import { tenants } from "../db/schema/tenants.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueue } from "../jobs/enqueue.ts";
import type { Logger } from "../telemetry/logger.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { DEFAULT_PLAN } from "./catalog.ts";
import { subscriptionChanged } from "./notifications.ts";
import { DAY_MS, type SubscriptionEvent, type SubscriptionState } from "./subscription-states.ts";
import {
  type PlanInfo,
  planTransition,
  refuseSource,
  type SubscriptionFields,
  type TransitionRefusal,
  type TransitionRequest,
  targetPlanCode,
} from "./transition-plan.ts";

/** An event as a caller sends it; who sent it comes from the ctx (history `actor_id`). */
export interface SubscriptionEventInput extends TransitionRequest {
  /** The provider's event id: a second delivery of the same id changes nothing. */
  externalEventId?: string | null;
  reason?: string;
}

export type Subscription = typeof subscriptions.$inferSelect;

export interface TransitionResult {
  subscription: Subscription;
  /** false for a duplicate delivery of an external event. */
  changed: boolean;
  from: SubscriptionState;
  to: SubscriptionStatus;
  historyId: number | null;
}

export interface TransitionContext {
  clock: Clock;
  graceDays: number;
  defaultMaxAttempts?: number;
}

export interface BillingDeps {
  database: Database;
  cache: Cache | null;
  clock: Clock;
  logger: Logger;
  config: { settings: Settings };
}

export function transitionContext(deps: BillingDeps): TransitionContext {
  return {
    clock: deps.clock,
    graceDays: deps.config.settings.SaasSubscriptions.PastDueGraceDays,
    defaultMaxAttempts: deps.config.settings.BackgroundProcessing.JobMaxAttempts,
  };
}

export async function getSubscription(db: Executor, tenantId: string): Promise<Subscription | null> {
  const [row] = await db.select().from(subscriptions).where(eq(subscriptions.tenantId, tenantId));
  return row ?? null;
}

/** The tenant's subscription (null: none yet, the default plan applies); 404 for an unknown tenant. */
export async function getTenantSubscription(deps: BillingDeps, ctx: TenantCtx): Promise<Subscription | null> {
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  return getSubscription(deps.database.db, ctx.tenantId);
}

/** Every change of the tenant's subscription, newest first, keyset-paginated on the history id. */
export async function listSubscriptionHistory(
  deps: BillingDeps,
  ctx: TenantCtx,
  input: { limit: number; before?: number },
) {
  const db = deps.database.db;
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  return db
    .select()
    .from(subscriptionHistory)
    .where(
      and(
        eq(subscriptionHistory.tenantId, ctx.tenantId),
        input.before ? lt(subscriptionHistory.id, input.before) : undefined,
      ),
    )
    .orderBy(desc(subscriptionHistory.id))
    .limit(input.limit);
}

async function findPlan(db: Executor, code: string | undefined): Promise<PlanInfo | undefined> {
  if (!code) return undefined;
  const [plan] = await db
    .select({ code: plans.code, priceCents: plans.priceCents, system: plans.system })
    .from(plans)
    .where(eq(plans.code, code));
  return plan;
}

const refusalError = (r: TransitionRefusal) => new AppError(r.code, r.detail, { fields: r.fields });

/**
 * Applies one event to the tenant's subscription inside `tx`: locks the row, asks `planTransition`
 * what to do, writes the new row and a history entry, and enqueues the notification job (in the
 * same transaction). The caller invalidates the tenant-features cache after commit.
 */
async function applyEventInTx(
  tx: Tx,
  context: TransitionContext,
  tenantId: string,
  input: SubscriptionEventInput & { actorId: string | null },
): Promise<TransitionResult> {
  const sourceRefusal = refuseSource(input);
  if (sourceRefusal) throw refusalError(sourceRefusal);
  const now = context.clock.now();
  const [current] = await tx
    .select()
    .from(subscriptions)
    .where(eq(subscriptions.tenantId, tenantId))
    .for("update");
  const from: SubscriptionState = current?.status ?? "none";

  if (input.externalEventId) {
    const [seen] = await tx
      .select({ id: subscriptionHistory.id })
      .from(subscriptionHistory)
      .where(
        and(
          eq(subscriptionHistory.tenantId, tenantId),
          eq(subscriptionHistory.externalEventId, input.externalEventId),
        ),
      );
    if (seen && current)
      return { subscription: current, changed: false, from, to: current.status, historyId: seen.id };
  }

  const plan = planTransition({
    current: current ?? null,
    request: input,
    defaultPlan: DEFAULT_PLAN,
    plan: await findPlan(tx, targetPlanCode(current ?? null, input, DEFAULT_PLAN)),
    now,
    graceDays: context.graceDays,
  });
  if (!plan.ok) throw refusalError(plan.refusal);
  return writeTransition(tx, context, tenantId, input, current ?? null, plan.next);
}

/** Writes a planned transition: the row, its history entry and the notification job. */
async function writeTransition(
  tx: Tx,
  context: TransitionContext,
  tenantId: string,
  input: SubscriptionEventInput & { actorId: string | null },
  current: Subscription | null,
  next: SubscriptionFields,
): Promise<TransitionResult> {
  const now = context.clock.now();
  let row: Subscription | undefined;
  if (current) {
    [row] = await tx
      .update(subscriptions)
      .set({ ...next, version: sql`${subscriptions.version} + 1`, updatedAt: now })
      .where(eq(subscriptions.id, current.id))
      .returning();
  } else {
    [row] = await tx
      .insert(subscriptions)
      .values({ tenantId, ...next, createdAt: now, updatedAt: now })
      .onConflictDoNothing({ target: subscriptions.tenantId })
      .returning();
    if (!row) throw new ConcurrentCreateError();
  }
  if (!row) throw new Error("subscription write returned no row");

  // what changed, as the history row records it and the subscription.changed job carries it
  const change = {
    tenantId,
    subscriptionId: row.id,
    event: input.event,
    fromStatus: current?.status ?? null,
    toStatus: row.status,
    fromPlan: current?.planCode ?? null,
    toPlan: row.planCode,
    source: input.source,
  };
  const [history] = await tx
    .insert(subscriptionHistory)
    .values({
      ...change,
      actorId: input.actorId,
      externalEventId: input.externalEventId ?? null,
      reason: input.reason ?? "",
      occurredAt: now,
    })
    .returning({ id: subscriptionHistory.id });
  if (!history) throw new Error("history insert returned no row");

  await enqueue(
    tx,
    { clock: context.clock, defaultMaxAttempts: context.defaultMaxAttempts },
    subscriptionChanged,
    { ...change, historyId: history.id },
  );
  await emitEvent(tx, context, { tenantId, type: "subscription.changed", data: change });
  return {
    subscription: row,
    changed: true,
    from: current?.status ?? "none",
    to: row.status,
    historyId: history.id,
  };
}

/** Another transaction created the tenant's first subscription meanwhile: the event is retried on it. */
class ConcurrentCreateError extends AppError {
  constructor() {
    super("conflict", "The subscription was created concurrently; retry.");
  }
}

/** A unique violation of `constraint`, from postgres.js or PGlite, possibly wrapped by Drizzle (`cause`). */
function isUniqueViolation(error: unknown, constraint: string): boolean {
  let e: unknown = error;
  for (let depth = 0; e && depth < 5; depth++) {
    const pg = e as { code?: string; constraint_name?: string; constraint?: string; cause?: unknown };
    if (pg.code === "23505" && (pg.constraint_name ?? pg.constraint) === constraint) return true;
    e = pg.cause;
  }
  return false;
}

/** The `subscription.event` audit entry of a transition that changed something. */
const subscriptionAudit = (result: TransitionResult, event: string, source: string) =>
  ({
    action: "subscription.event",
    target: { type: "subscription", id: result.subscription.tenantId },
    details: { event, from: result.from, to: result.to, reason: source, plan: result.subscription.planCode },
  }) as const;

/**
 * Applies one event to a tenant's subscription (see `transitionTable`), then drops the tenant's
 * cached features so the next request sees the new state. Invalid transitions: 409 `conflict`.
 */
export async function applySubscriptionEvent(
  deps: BillingDeps,
  ctx: TenantCtx,
  input: SubscriptionEventInput,
): Promise<TransitionResult> {
  const db = deps.database.db;
  const { tenantId } = ctx;
  const event = { ...input, actorId: actorUserId(ctx) };
  await getTenant(deps, ctx, { tenantId });
  let result: TransitionResult;
  try {
    const attempt = () =>
      db.transaction(async (tx) => {
        const applied = await applyEventInTx(tx, transitionContext(deps), tenantId, event);
        if (applied.changed)
          await recordAudit(tx, ctx, subscriptionAudit(applied, input.event, input.source));
        return applied;
      });
    result = await attempt().catch((error: unknown) => {
      if (error instanceof ConcurrentCreateError) return attempt();
      throw error;
    });
  } catch (error) {
    // two deliveries of one external event raced past the duplicate check: the second changes nothing
    if (input.externalEventId && isUniqueViolation(error, "subscription_history_external_event_idx")) {
      const current = await getSubscription(db, tenantId);
      if (current)
        return {
          subscription: current,
          changed: false,
          from: current.status,
          to: current.status,
          historyId: null,
        };
    }
    throw error;
  }
  if (result.changed) await invalidate(deps.cache, [tenantFeaturesKey(tenantId)], { logger: deps.logger });
  return result;
}

export interface SubscriptionPassResult {
  changed: TransitionResult[];
  /** A full batch was due: run again at once. */
  more: boolean;
}

/**
 * One batch of the subscription loop: trialing/active subscriptions whose period ended unpaid become
 * `past_due`; `past_due` ones whose grace ran out (at exactly `PastDueGraceDays` × 24 h after
 * `past_due_since`) become `suspended`. Rows are claimed `FOR UPDATE SKIP LOCKED`, so any number of
 * processes can run it; a second pass finds nothing left to do. Each change goes through
 * `applyEventInTx` (history, notification job) and drops the tenant's cached features after commit.
 */
export async function runSubscriptionBatch(
  deps: BillingDeps,
  options: { batchSize: number },
): Promise<SubscriptionPassResult> {
  const context = transitionContext(deps);
  const now = context.clock.now();
  const graceCutoff = new Date(now.getTime() - context.graceDays * DAY_MS);
  const { changed, claimed } = await deps.database.db.transaction(async (tx) => {
    const due = await tx
      .select({ tenantId: subscriptions.tenantId, status: subscriptions.status })
      .from(subscriptions)
      .where(
        sql`(${subscriptions.status} in ('trialing', 'active') and ${subscriptions.currentPeriodEnd} <= ${now.toISOString()}::timestamptz)
          or (${subscriptions.status} = 'past_due' and ${subscriptions.pastDueSince} <= ${graceCutoff.toISOString()}::timestamptz)`,
      )
      .orderBy(subscriptions.updatedAt)
      .limit(options.batchSize)
      .for("update", { skipLocked: true });
    const results: TransitionResult[] = [];
    for (const row of due) {
      const event: SubscriptionEvent = row.status === "past_due" ? "grace_expired" : "period_ended_unpaid";
      try {
        // a savepoint per subscription: one that cannot move does not hold up the batch
        results.push(
          await tx.transaction(async (sp) => {
            const applied = await applyEventInTx(sp, context, row.tenantId, {
              event,
              source: "loop",
              actorId: null,
            });
            if (applied.changed)
              await recordAudit(
                sp,
                systemCtx("subscriptions", row.tenantId),
                subscriptionAudit(applied, event, "loop"),
              );
            return applied;
          }),
        );
      } catch (error) {
        // to the back of the queue: rows that fail every time must not starve the rest
        await tx
          .update(subscriptions)
          .set({ updatedAt: now })
          .where(eq(subscriptions.tenantId, row.tenantId));
        deps.logger.warn("subscription transition failed", { tenantId: row.tenantId, event, error });
      }
    }
    return { changed: results, claimed: due.length };
  });
  if (changed.length > 0) {
    await invalidate(
      deps.cache,
      changed.map((r) => tenantFeaturesKey(r.subscription.tenantId)),
      { logger: deps.logger },
    );
    deps.logger.info("subscriptions moved by the loop", {
      count: changed.length,
      moves: changed.map((r) => ({ tenantId: r.subscription.tenantId, from: r.from, to: r.to })),
    });
  }
  return { changed, more: claimed >= options.batchSize && changed.length > 0 };
}

/** A tenant whose subscription is past due, and when its grace runs out (then it is suspended). */
export interface PastDueTenant {
  tenantId: string;
  tenantCode: string;
  planCode: string;
  pastDueSince: Date | null;
  graceEndsAt: Date | null;
}

/** Tenants past due, the oldest first (at most `limit`, default 100), for platform staff. */
export async function listPastDueTenants(
  deps: Pick<BillingDeps, "database" | "config">,
  _ctx: Ctx,
  input: { limit?: number } = {},
): Promise<PastDueTenant[]> {
  const graceMs = deps.config.settings.SaasSubscriptions.PastDueGraceDays * DAY_MS;
  const rows = await deps.database.db
    .select({
      tenantId: subscriptions.tenantId,
      tenantCode: tenants.code,
      planCode: subscriptions.planCode,
      pastDueSince: subscriptions.pastDueSince,
    })
    .from(subscriptions)
    .innerJoin(tenants, eq(tenants.id, subscriptions.tenantId))
    .where(eq(subscriptions.status, "past_due"))
    .orderBy(asc(subscriptions.pastDueSince))
    .limit(Math.min(500, Math.max(1, input.limit ?? 100)));
  return rows.map((r) => ({ ...r, graceEndsAt: graceEndsAt(r.pastDueSince, graceMs) }));
}

/** When a past-due subscription's grace runs out: `PastDueGraceDays` after it went past due. */
export function graceEndsAt(pastDueSince: Date | null, graceMs: number): Date | null {
  return pastDueSince ? new Date(pastDueSince.getTime() + graceMs) : null;
}
