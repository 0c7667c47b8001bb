import { recordAudit } from "../audit/record.ts";
import { invalidate, tenantFeaturesKey } from "../cache/read-through.ts";
import { actorUserId, type TenantCtx } from "../context.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { type BillingDeps, transitionContext } from "./billing-deps.ts";
import { findSubscription, type SubscriptionEventInput, type TransitionResult } from "./subscription-row.ts";
import { subscriptionAudit, transitionSubscription } from "./transition-subscription.ts";
import { ConcurrentCreateError } from "./write-transition.ts";

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
 * Applies one event to the ctx's tenant's subscription (see `transitionTable`), with its audit
 * entry, in one transaction; then drops the tenant's cached features so the next request sees the
 * new state. Invalid transitions: 409 `conflict`; an unknown tenant: 404.
 */
export async function applySubscriptionEvent(
  deps: BillingDeps,
  ctx: TenantCtx,
  input: SubscriptionEventInput,
): Promise<TransitionResult> {
  const { tenantId } = ctx;
  const event = { ...input, actorId: actorUserId(ctx) };
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const attempt = () =>
    withTransaction(deps, ctx, async (tx, txCtx) => {
      const applied = await transitionSubscription(tx, transitionContext(deps), tenantId, event);
      if (applied.changed)
        await recordAudit(tx, txCtx, subscriptionAudit(applied, input.event, input.source));
      return applied;
    });
  let result: TransitionResult;
  try {
    result = await attempt().catch((error: unknown) => {
      if (error instanceof ConcurrentCreateError) return attempt();
      throw error;
    });
  } catch (error) {
    // two deliveries of one external event raced past the duplicate check: the second changes nothing
    if (input.externalEventId && isUniqueViolation(error, "subscription_history_external_event_idx")) {
      const current = await withDatabase(deps, ctx, (db) => findSubscription(db, tenantId));
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
