/**
 * Each tenant's request rate from its plan (`rate_limit_per_minute`, a `rate` feature), for the
 * per-tenant limiter (src/http/middleware/rate-limit.ts, `tenantRateLimit`), and its monthly
 * `api_calls` (src/http/middleware/api-calls.ts). Held in process for
 * `RateLimiting:Tenant:PlanSeconds` in front of the tenant features (themselves read through the
 * cache), so a request of a tenant seen lately costs a map lookup and no promise; a plan change
 * reaches every process within that time (docs/billing.md, "Request rate per tenant"); limits held
 * since a clock that has been put back are read again (`isFresh`).
 */
import { isFresh } from "../clock.ts";
import { systemCtx } from "../context.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { BillingDeps } from "./billing-deps.ts";
import { cachedTenantFeatures } from "./entitlements.ts";

export const RATE_FEATURE = "rate_limit_per_minute";
const API_CALLS_FEATURE = "api_calls";

/** What the plan gives a tenant per window; null: no limit. */
interface PlanLimits {
  perMinute: number | null;
  apiCallsPerMonth: number | null;
}

/** The most tenants held at once; past it the held entries are dropped and read again. */
const HELD_TENANTS = 10_000;

export class PlanRateLimits {
  readonly #deps: BillingDeps;
  readonly #heldMs: number;
  readonly #held = new Map<string, PlanLimits & { at: number }>();
  readonly #loading = new Map<string, Promise<PlanLimits>>();
  #lastFailureLog = 0;

  constructor(deps: BillingDeps & { logger: Logger }, heldSeconds: number) {
    this.#deps = deps;
    this.#heldMs = heldSeconds * 1000;
  }

  /**
   * Requests per minute the tenant's plan allows; null: no limit (the feature unlimited, or not in
   * the plan). Synchronous while held. When the features cannot be read, null (the limiter fails
   * open, as the per-key one does), logged at most every 30 s.
   */
  perMinute(tenantId: string): number | null | Promise<number | null> {
    const held = this.#held.get(tenantId);
    if (held && this.#fresh(held.at)) return held.perMinute;
    return (this.#loading.get(tenantId) ?? this.#load(tenantId)).then((limits) => limits.perMinute);
  }

  /** The tenant's `api_calls` a month (null: unlimited, or not known); as perMinute. */
  apiCallsPerMonth(tenantId: string): number | null | Promise<number | null> {
    const held = this.#held.get(tenantId);
    if (held && this.#fresh(held.at)) return held.apiCallsPerMonth;
    return (this.#loading.get(tenantId) ?? this.#load(tenantId)).then((limits) => limits.apiCallsPerMonth);
  }

  #fresh(at: number): boolean {
    return isFresh(at, this.#heldMs, this.#deps.clock.now().getTime());
  }

  #load(tenantId: string): Promise<PlanLimits> {
    const loading = cachedTenantFeatures(this.#deps, systemCtx("tenant-rate-limit", tenantId)).then(
      ({ features }) => {
        const limitOf = (key: string) => {
          const feature = features[key];
          return feature?.enabled && feature.limit !== null ? feature.limit : null;
        };
        const limits = { perMinute: limitOf(RATE_FEATURE), apiCallsPerMonth: limitOf(API_CALLS_FEATURE) };
        if (this.#held.size >= HELD_TENANTS) this.#held.clear();
        this.#held.set(tenantId, { ...limits, at: this.#deps.clock.now().getTime() });
        return limits;
      },
      (error: unknown) => {
        const now = Date.now();
        if (now - this.#lastFailureLog > 30_000) {
          this.#lastFailureLog = now;
          this.#deps.logger.warn("tenant plan limits unknown (features unreadable); not limiting", { error });
        }
        return { perMinute: null, apiCallsPerMonth: null };
      },
    );
    this.#loading.set(tenantId, loading);
    return loading.finally(() => this.#loading.delete(tenantId));
  }
}
