import { sql } from "drizzle-orm";
import type { Clock } from "../clock.ts";
import { type Executor, execute } from "../db/client.ts";
import { emitEvent } from "../events/outbox.ts";
import type { UsagePeriodWindow } from "./counters.ts";

/** Percentages of a limit a tenant is told of (`usage.threshold_reached`), once each per period. */
export const USAGE_THRESHOLDS = [80, 100] as const;

/**
 * After a usage event is written on `tx`: when the period's total (the cached counter after this
 * event's increment, else the ledger's sum with this event) is at or past 80 % or 100 % of the
 * tenant's effective limit, emits `usage.threshold_reached`
 * in the same transaction — once per threshold and period (a notice row with a unique key). The
 * limit is read as `loadTenantFeatures` (src/billing/entitlements.ts) works it out: the override,
 * else the plan's entry; the suspended plan's, without overrides, for a suspended tenant; the
 * default plan without a live subscription.
 */
export async function noteUsageThresholds(
  tx: Executor,
  ctx: { clock: Clock },
  input: {
    tenantId: string;
    feature: string;
    quantity: number;
    window: UsagePeriodWindow;
    /** The period's usage with this event, when the cached counter gave it; null: summed from the ledger. */
    used?: number | null;
    /** The limit the caller checked (null: unlimited); undefined: not known, looked up here. */
    limit?: number | null;
  },
): Promise<void> {
  if (input.quantity <= 0) return;
  // the common case costs no statement: the caller's limit and the counter say it is far from the marks
  // (the lookup below still decides, so a limit changed meanwhile is only noticed at the next event)
  const known = input.used !== null && input.used !== undefined && input.limit !== undefined;
  if (
    known &&
    (input.limit === null || (input.used as number) < ((input.limit as number) * USAGE_THRESHOLDS[0]) / 100)
  )
    return;
  const start = input.window.start.toISOString();
  const [row] = await execute<{
    limit: string | number | null;
    enabled: boolean | null;
    used: string | number;
  }>(
    tx,
    sql`with sub as (
          select status, plan_code from subscriptions where tenant_id = ${input.tenantId}
        ),
        chosen as (
          select case
            when (select status from sub) = 'suspended' then 'suspended'
            when (select status from sub) is null or (select status from sub) = 'canceled' then coalesce(
              (select code from plans where is_default and not system order by sort_order limit 1), 'free')
            else (select plan_code from sub) end as plan,
            coalesce((select status from sub) = 'suspended', false) as suspended
        ),
        override as (
          select o.enabled, o."limit" from tenant_feature_overrides o, chosen
          where o.tenant_id = ${input.tenantId} and o.feature_key = ${input.feature} and not chosen.suspended
        ),
        entry as (
          select pf.enabled, pf."limit" from plan_features pf, chosen
          where pf.plan_code = chosen.plan and pf.feature_key = ${input.feature}
        )
        select
          case when exists (select 1 from override) then (select "limit" from override) else (select "limit" from entry) end as "limit",
          case when exists (select 1 from override) then (select enabled from override) else (select enabled from entry) end as enabled,
          ${
            input.used === null || input.used === undefined
              ? sql`(select coalesce(sum(quantity), 0) from usage_events
                     where tenant_id = ${input.tenantId} and feature_key = ${input.feature} and period_start = ${start}::timestamptz)`
              : sql`${input.used}::bigint`
          } as used`,
  );
  if (!row?.enabled || row.limit === null) return;
  const limit = Number(row.limit);
  const used = Number(row.used);
  if (limit <= 0) return;
  for (const threshold of USAGE_THRESHOLDS) {
    // at or past the mark, not "crossed by this event": a crossing two concurrent events split
    // between them (neither sees the other's row) is caught by the next one; the notice row keeps it once
    if (used < (limit * threshold) / 100) continue;
    const [fresh] = await execute(
      tx,
      sql`insert into usage_threshold_notices (tenant_id, feature_key, period_start, threshold)
          values (${input.tenantId}, ${input.feature}, ${start}::timestamptz, ${threshold})
          on conflict do nothing returning threshold`,
    );
    if (!fresh) continue;
    await emitEvent(tx, ctx, {
      tenantId: input.tenantId,
      type: "usage.threshold_reached",
      data: { feature: input.feature, period: input.window.label, threshold, limit, used },
    });
  }
}
