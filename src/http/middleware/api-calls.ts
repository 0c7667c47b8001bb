import type { MiddlewareHandler } from "hono";
import { AppError } from "../../errors.ts";
import type { AppEnv } from "../request-context.ts";

/** What counts the calls (src/usage/api-calls.ts, `ApiCallMeter`). */
export interface ApiCallCounter {
  count(tenantId: string): void;
  /** The tenant's calls this month as far as this process knows; null: not known yet. */
  known(tenantId: string): number | null;
}

/** Open to a tenant past its limit: where it sees its plan and usage, to understand and upgrade. */
const ALWAYS_OPEN = new Set(["/api/tenant/features"]);

/**
 * `api_calls`: each request of a tenant (its users' and keys') to the tenant API counts one, in
 * process (`counter.count`, written to the usage ledger in batches). Once the tenant's month is at
 * its plan's limit (`limitOf`: null, unlimited) as far as this process knows — the shared counter at
 * its last write plus what it counted since — further requests get 403 `usage_limit_reached`,
 * except its features page. The count is as fresh as the last flush: the limit can be overshot by
 * what all processes counted in one flush interval (docs/billing.md, "api_calls").
 */
export function meterApiCalls(
  counter: ApiCallCounter,
  limitOf: (tenantId: string) => number | null | Promise<number | null>,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const tenantId = c.get("principal")?.tenantId;
    if (!tenantId) return next();
    const known = counter.known(tenantId);
    if (known !== null && !ALWAYS_OPEN.has(c.req.path)) {
      let limit = limitOf(tenantId);
      if (limit instanceof Promise) limit = await limit;
      if (limit !== null && known >= limit)
        throw new AppError(
          "usage_limit_reached",
          `The monthly limit of "api_calls" (${limit} calls) is reached.`,
        );
    }
    counter.count(tenantId);
    await next();
  };
}
