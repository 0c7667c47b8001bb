import { and, desc, eq, lt, sql } from "drizzle-orm";
import type { Cache } from "../cache/port.ts";
import { invalidate, tenantFeaturesKey } from "../cache/read-through.ts";
import type { Clock } from "../clock.ts";
import type { Settings } from "../config/schema.ts";
import type { Database, Executor, Tx } from "../db/client.ts";
import { plans, type SubscriptionStatus, subscriptionHistory, subscriptions } from "../db/schema/billing.ts";
import { AppError } from "../errors.ts";
import { enqueue } from "../jobs/enqueue.ts";
import type { Logger } from "../telemetry/logger.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { DEFAULT_PLAN } from "./catalog.ts";
import { subscriptionChanged } from "./notifications.ts";

/**
 * Subscription states and transitions: the ONE place a subscription changes. Admin endpoints, the
 * payment webhook and the subscription loop all call `applySubscriptionEvent` (or, inside a
 * transaction that already holds the row, `applyEventInTx`). docs/billing.md shows the same table.
 */
export const subscriptionEvents = [
  "start_trial",
  "activate",
  "payment_succeeded",
  "payment_failed",
  "period_ended_unpaid",
  "grace_expired",
  "suspend",
  "cancel",
  "reactivate",
  "change_plan",
] as const;
export type SubscriptionEvent = (typeof subscriptionEvents)[number];

/** `none`: the tenant has no subscription row yet (it gets the default plan's features). */
export type SubscriptionState = SubscriptionStatus | "none";
export const subscriptionStates: SubscriptionState[] = [
  "none",
  "trialing",
  "active",
  "past_due",
  "suspended",
  "canceled",
];

/** state × event → next state; a missing entry is an invalid transition (409 `conflict`). */
export const transitionTable: Record<
  SubscriptionState,
  Partial<Record<SubscriptionEvent, SubscriptionStatus>>
> = {
  none: { start_trial: "trialing", activate: "active" },
  trialing: {
    activate: "active",
    payment_succeeded: "active",
    payment_failed: "past_due",
    period_ended_unpaid: "past_due",
    suspend: "suspended",
    cancel: "canceled",
    change_plan: "trialing",
  },
  active: {
    payment_succeeded: "active",
    payment_failed: "past_due",
    period_ended_unpaid: "past_due",
    suspend: "suspended",
    cancel: "canceled",
    change_plan: "active",
  },
  past_due: {
    payment_succeeded: "active",
    // a retried charge failing again keeps the grace that already runs (past_due_since unchanged)
    payment_failed: "past_due",
    grace_expired: "suspended",
    suspend: "suspended",
    cancel: "canceled",
    change_plan: "past_due",
  },
  suspended: { payment_succeeded: "active", reactivate: "active", cancel: "canceled" },
  canceled: { reactivate: "active" },
};

export type EventSource = "admin" | "webhook" | "loop";

/** Who may send which event: the loop alone decides that time ran out. */
export const eventSources: Record<EventSource, readonly SubscriptionEvent[]> = {
  admin: [
    "start_trial",
    "activate",
    "payment_succeeded",
    "payment_failed",
    "suspend",
    "cancel",
    "reactivate",
    "change_plan",
  ],
  webhook: ["activate", "payment_succeeded", "payment_failed", "cancel", "change_plan"],
  loop: ["period_ended_unpaid", "grace_expired"],
};

export function nextState(from: SubscriptionState, event: SubscriptionEvent): SubscriptionStatus | null {
  return transitionTable[from][event] ?? null;
}

export const DAY_MS = 24 * 60 * 60 * 1000;
export const DEFAULT_TRIAL_DAYS = 14;

export interface SubscriptionEventInput {
  event: SubscriptionEvent;
  source: EventSource;
  /** Target plan: required for `change_plan`, optional for `start_trial`/`activate`. */
  plan?: string;
  /** The new period (a payment provider sends it); default: now to one month (trial: 14 days) later. */
  periodStart?: Date;
  periodEnd?: Date;
  actorId?: string | null;
  /** The provider's event id: a second delivery of the same id changes nothing. */
  externalEventId?: string | null;
  externalRef?: string | null;
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

/** When a past-due subscription's grace runs out: exactly `graceDays` × 24 h after it became past due. */
export function graceEndsAt(pastDueSince: Date, graceDays: number): Date {
  return new Date(pastDueSince.getTime() + graceDays * DAY_MS);
}

/** One calendar month later (UTC), clamped to the month's last day (Jan 31 → Feb 28/29). */
export function addMonthUtc(date: Date): Date {
  const d = new Date(date.getTime());
  const day = d.getUTCDate();
  d.setUTCDate(1);
  d.setUTCMonth(d.getUTCMonth() + 1);
  const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
  d.setUTCDate(Math.min(day, last));
  return d;
}

export async function getSubscription(db: Executor, tenantId: string): Promise<Subscription | null> {
  const [row] = await db.select().from(subscriptions).where(eq(subscriptions.tenantId, tenantId));
  return row ?? null;
}

export async function listSubscriptionHistory(
  db: Executor,
  tenantId: string,
  options: { limit: number; before?: number },
) {
  return db
    .select()
    .from(subscriptionHistory)
    .where(
      and(
        eq(subscriptionHistory.tenantId, tenantId),
        options.before ? lt(subscriptionHistory.id, options.before) : undefined,
      ),
    )
    .orderBy(desc(subscriptionHistory.id))
    .limit(options.limit);
}

async function assignablePlan(db: Executor, code: string): Promise<{ code: string; priceCents: number }> {
  const [plan] = await db
    .select({ code: plans.code, priceCents: plans.priceCents, system: plans.system })
    .from(plans)
    .where(eq(plans.code, code));
  if (!plan || plan.system)
    throw new AppError("validation_failed", "No such plan.", {
      fields: [{ path: "plan", message: `unknown plan "${code}"` }],
    });
  return plan;
}

function invalid(from: SubscriptionState, event: SubscriptionEvent, why?: string): AppError {
  return new AppError(
    "conflict",
    why ?? `A subscription in state "${from}" does not accept the event "${event}".`,
  );
}

/**
 * Applies one event to the tenant's subscription inside `tx`: locks the row, checks the table and
 * the event's guard, writes the new row and a history entry, and enqueues the notification job (in
 * the same transaction). The caller invalidates the tenant-features cache after commit.
 */
export async function applyEventInTx(
  tx: Tx,
  context: TransitionContext,
  tenantId: string,
  input: SubscriptionEventInput,
): Promise<TransitionResult> {
  if (!eventSources[input.source].includes(input.event))
    throw new AppError("bad_request", `The event "${input.event}" cannot come from ${input.source}.`);
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

  const to = nextState(from, input.event);
  if (!to) throw invalid(from, input.event);

  // guards: the loop's events only hold once time has really run out (checked under the row lock)
  if (input.event === "period_ended_unpaid") {
    if (!current?.currentPeriodEnd || current.currentPeriodEnd.getTime() > now.getTime())
      throw invalid(from, input.event, "The current period has not ended.");
  }
  if (input.event === "grace_expired") {
    if (
      !current?.pastDueSince ||
      graceEndsAt(current.pastDueSince, context.graceDays).getTime() > now.getTime()
    )
      throw invalid(from, input.event, "The past-due grace period has not run out.");
  }

  const planCode =
    input.event === "change_plan"
      ? input.plan
      : input.event === "start_trial" || input.event === "activate"
        ? (input.plan ?? current?.planCode ?? DEFAULT_PLAN)
        : (current?.planCode ?? DEFAULT_PLAN);
  if (!planCode)
    throw new AppError("validation_failed", "A plan is required.", {
      fields: [{ path: "plan", message: "required for change_plan" }],
    });
  const plan = await assignablePlan(tx, planCode);
  const paid = plan.priceCents > 0;
  if (input.event === "start_trial" && !paid)
    throw new AppError("validation_failed", "A trial needs a paid plan.", {
      fields: [{ path: "plan", message: `"${plan.code}" is free` }],
    });

  const next = {
    planCode: plan.code,
    status: to,
    currentPeriodStart: current?.currentPeriodStart ?? now,
    currentPeriodEnd: current?.currentPeriodEnd ?? null,
    pastDueSince: current?.pastDueSince ?? null,
    suspendedAt: current?.suspendedAt ?? null,
    canceledAt: current?.canceledAt ?? null,
    externalRef: input.externalRef ?? current?.externalRef ?? null,
  };
  const endsBeforeStart = (start: Date) =>
    new AppError("validation_failed", "The period ends before it starts.", {
      fields: [
        {
          path: "periodEnd",
          message: input.periodStart
            ? "must be after periodStart"
            : `must be after now (${start.toISOString()})`,
        },
      ],
    });
  const newPeriod = (length: (start: Date) => Date | null) => {
    // the effective start (periodStart, else now) must come before the end, whether or not the
    // caller gave a start: an end in the past would be stored and moved to past_due at once
    const start = input.periodStart ?? now;
    if (input.periodEnd && input.periodEnd.getTime() <= start.getTime()) throw endsBeforeStart(start);
    next.currentPeriodStart = start;
    next.currentPeriodEnd = input.periodEnd ?? length(start);
  };
  if (input.periodEnd && input.periodStart && input.periodEnd.getTime() <= input.periodStart.getTime())
    throw endsBeforeStart(input.periodStart);

  switch (to) {
    case "trialing":
      if (input.event === "start_trial")
        newPeriod((start) => new Date(start.getTime() + DEFAULT_TRIAL_DAYS * DAY_MS));
      else if (input.event === "change_plan" && !paid) {
        // moving a trial to a free plan ends the trial (documented beside the table)
        next.status = "active";
        newPeriod(() => null);
      }
      break;
    case "active":
      if (input.event === "change_plan") {
        if (!paid) newPeriod(() => null);
        else if (!next.currentPeriodEnd) newPeriod(addMonthUtc);
      } else newPeriod((start) => (paid ? addMonthUtc(start) : null));
      next.pastDueSince = null;
      next.suspendedAt = null;
      next.canceledAt = null;
      break;
    case "past_due":
      if (input.event === "change_plan" && !paid) {
        // a free plan has nothing left to pay: the subscription leaves the suspension path
        // (active, no period end, no grace running), as a trial moved to a free plan does
        next.status = "active";
        newPeriod(() => null);
        next.pastDueSince = null;
        next.suspendedAt = null;
        next.canceledAt = null;
      } else if (from !== "past_due") next.pastDueSince = now;
      break;
    case "suspended":
      next.suspendedAt = now;
      break;
    case "canceled":
      next.canceledAt = now;
      next.pastDueSince = null;
      break;
  }

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

  const [history] = await tx
    .insert(subscriptionHistory)
    .values({
      tenantId,
      subscriptionId: row.id,
      event: input.event,
      fromStatus: current?.status ?? null,
      toStatus: row.status,
      fromPlan: current?.planCode ?? null,
      toPlan: row.planCode,
      source: input.source,
      actorId: input.actorId ?? null,
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
    {
      tenantId,
      subscriptionId: row.id,
      historyId: history.id,
      event: input.event,
      fromStatus: current?.status ?? null,
      toStatus: row.status,
      fromPlan: current?.planCode ?? null,
      toPlan: row.planCode,
      source: input.source,
    },
  );
  return { subscription: row, changed: true, from, to: row.status, historyId: history.id };
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

/**
 * Applies one event to a tenant's subscription (see `transitionTable`), then drops the tenant's
 * cached features so the next request sees the new state. Invalid transitions: 409 `conflict`.
 */
export async function applySubscriptionEvent(
  deps: BillingDeps,
  tenantId: string,
  input: SubscriptionEventInput,
): Promise<TransitionResult> {
  const db = deps.database.db;
  await getTenant(db, tenantId);
  let result: TransitionResult;
  try {
    const attempt = () =>
      db.transaction((tx) => applyEventInTx(tx, transitionContext(deps), tenantId, input));
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
          await tx.transaction((sp) => applyEventInTx(sp, context, row.tenantId, { event, source: "loop" })),
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
