import type { Context, MiddlewareHandler, Next } from "hono";
import type { AuthDeps } from "../../auth/deps.ts";
import { type OpenSession, rememberedTokenSession } from "../../auth/session-lookup.ts";
import { type Clock, epochMs } from "../../clock.ts";
import type { Environment, Settings } from "../../config/schema.ts";
import { AppError } from "../../errors.ts";
import { nextTurn } from "../../runtime/next-turn.ts";
import type { CounterStore, RateOutcome } from "../../security/counter-store.ts";
import { RateLeases } from "../../security/rate-leases.ts";
import type { Logger } from "../../telemetry/logger.ts";
import { clientIp } from "../client-ip.ts";
import type { AppEnv } from "../request-context.ts";

export interface RateLimitPolicy {
  /** Policy name in the headers and the counter key (`global`, `auth`). */
  name: string;
  limit: number;
  windowSeconds: number;
  /**
   * When the counter store is unreachable: `closed` answers 503 (authentication endpoints, so an
   * outage never means unlimited guessing); `open` lets the request through and logs it.
   */
  onUnavailable: "open" | "closed";
}

/** Used outside Production when the settings are absent (Production requires them). */
export const RATE_LIMIT_DEFAULTS = {
  global: { limit: 600, windowSeconds: 60 },
  auth: { limit: 30, windowSeconds: 60 },
} as const;

/** The per-key partition: one bucket per tenant API key, wherever its requests come from. */
export function apiKeyPolicy(settings: Settings): RateLimitPolicy {
  const { PermitLimit, WindowSeconds } = settings.RateLimiting.ApiKey;
  return { name: "apikey", limit: PermitLimit, windowSeconds: WindowSeconds, onUnavailable: "open" };
}

/** A request's bucket: the client address, or (`apiKeyPolicy`) the key; null: not counted. */
export type Partition = (c: Context<AppEnv>) => string | null;

const byClientIp: Partition = (c) => clientIp(c);

/**
 * The global limit's bucket for a caller whose session this process remembers open: the person
 * (`user:<id>`; for an impersonation, the platform admin acting), wherever they call from.
 */
export function callerBucket(session: OpenSession): string {
  return `user:${session.impersonatorId ?? session.identity.userId}`;
}

/**
 * The global limit's partition (docs/cache.md, "Whose budget"): a request with a bearer access token
 * this process has verified, whose session it remembers open (`rememberedTokenSession`: two lookups
 * in memory, no I/O, no signature check), counts against its person (`callerBucket`); everything
 * else — no credentials, a token not verified here yet, an expired one, a session ended, an API key,
 * a browser cookie — against its client address (`clientIp`). So the people behind one office NAT
 * address each have their budget, a token replayed from many addresses has one, and a flood of
 * made-up or revoked tokens is counted per address before anything looks at them.
 */
export function byCaller(deps: AuthDeps): Partition {
  return (c) => {
    const authorization = c.req.raw.headers.get("authorization");
    if (authorization?.startsWith("Bearer ")) {
      const found = rememberedTokenSession(deps, authorization.slice(7));
      if (found !== undefined && !("refused" in found)) return callerBucket(found);
    }
    return clientIp(c);
  };
}

/** The calling API key's id; requests not made with a key are not counted. */
export const byApiKey: Partition = (c) => {
  const principal = c.get("principal");
  return principal?.kind === "apiKey" ? principal.keyId : null;
};

export function rateLimitPolicies(
  settings: Settings,
  environment: Environment,
): { global: RateLimitPolicy; auth: RateLimitPolicy } {
  const { Global, Auth } = settings.RateLimiting;
  const pick = (value: number | undefined, fallback: number, key: string) => {
    if (value !== undefined) return value;
    // config/production.ts already refuses to start without them; this guards direct callers
    if (environment === "Production") throw new Error(`RateLimiting:${key} is required in Production`);
    return fallback;
  };
  return {
    global: {
      name: "global",
      limit: pick(Global.PermitLimit, RATE_LIMIT_DEFAULTS.global.limit, "Global:PermitLimit"),
      windowSeconds: pick(
        Global.WindowSeconds,
        RATE_LIMIT_DEFAULTS.global.windowSeconds,
        "Global:WindowSeconds",
      ),
      onUnavailable: "open",
    },
    auth: {
      name: "auth",
      limit: pick(Auth.PermitLimit, RATE_LIMIT_DEFAULTS.auth.limit, "Auth:PermitLimit"),
      windowSeconds: pick(Auth.WindowSeconds, RATE_LIMIT_DEFAULTS.auth.windowSeconds, "Auth:WindowSeconds"),
      onUnavailable: "closed",
    },
  };
}

export interface RateLimitOptions {
  store: CounterStore;
  clock: Clock;
  logger: Logger;
}

/**
 * The requests of one event-loop turn for the same bucket, decided in one store call: `count`
 * requests taken at once get exactly what they would one after another (`CounterStore.rate`), so
 * a client's burst costs one round trip to the cache instead of one per request. A request waits
 * at most for the rest of the turn it arrived in.
 */
function coalescedRate(options: RateLimitOptions, policy: RateLimitPolicy, leases: RateLeases) {
  const windowMs = policy.windowSeconds * 1000;
  type Waiter = { resolve: (outcome: RateOutcome) => void; reject: (error: unknown) => void };
  let pending = new Map<string, Waiter[]>();
  const flush = () => {
    const batch = pending;
    pending = new Map();
    const nowMs = options.clock.now().getTime();
    for (const [key, waiters] of batch) {
      const fail = (error: unknown) => {
        for (const waiter of waiters) waiter.reject(error);
      };
      const count = waiters.length;
      try {
        const extra = leases.extra(key, count, nowMs);
        options.store.rate(key, policy.limit, windowMs, nowMs, count + extra).then((outcomes) => {
          leases.keep(key, outcomes, count, nowMs);
          for (const [i, waiter] of waiters.entries()) waiter.resolve(outcomes[i] as RateOutcome);
        }, fail);
      } catch (error) {
        // a store that throws instead of rejecting must not leave this batch (or the next) waiting
        fail(error);
      }
    }
  };
  return (key: string): Promise<RateOutcome> =>
    new Promise<RateOutcome>((resolve, reject) => {
      const waiters = pending.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else {
        if (pending.size === 0) nextTurn(flush);
        pending.set(key, [{ resolve, reject }]);
      }
    });
}

/**
 * One rate-limit policy's decisions in this process: its leases, its coalesced store calls and its
 * headers, shared by the middleware (`middleware`) and the edge's fast lane (`leased`,
 * `stateHeader`; src/http/fast-lane.ts), so both decide and answer alike from the same leases.
 */
export interface RateLimiter {
  readonly policy: RateLimitPolicy;
  /**
   * Token-bucket (GCRA) rate limit partitioned by client IP (`clientIp(c)`, http/client-ip.ts), or
   * by what `partition` says (`byApiKey`: after authentication, one bucket per API key).
   * Adds `RateLimit-Policy: "<name>";q=<limit>;w=<window>` and `RateLimit: "<name>";r=<left>;t=<s>`
   * (several policies on one route are listed together); a refused request gets 429 `rate_limited`
   * with `Retry-After`.
   */
  middleware(partition?: Partition): MiddlewareHandler<AppEnv>;
  /**
   * A permit for `bucket` (a client IP, a key id) from this process's lease, decided without an await
   * or a store call; undefined when only the store can decide (the middleware then asks it). A leased
   * permit is always an admission: refusals are the store's alone (src/security/rate-leases.ts).
   */
  leased(bucket: string): RateOutcome | undefined;
  /** The `RateLimit` value an outcome is answered with (`"<name>";r=<left>;t=<s>`). */
  stateHeader(outcome: RateOutcome): string;
  /** The `RateLimit-Policy` value (the same for every outcome). */
  readonly policyHeader: string;
  /**
   * The store's decision for `bucket` when no lease has a permit, as the middleware takes it (one
   * store call per bucket and event-loop turn, the lease kept from it); null when the store is
   * unreachable and the policy lets requests through (logged as the middleware logs it); a
   * fail-closed policy's outage rejects with 503 `unavailable`.
   */
  decided(bucket: string): Promise<RateOutcome | null>;
}

/** A policy's limiter (`RateLimiter`): one per policy and process, whatever uses it. */
export function rateLimiter(policy: RateLimitPolicy, options: RateLimitOptions): RateLimiter {
  // a fail-closed policy (auth) is decided by the store on every request: no permit is held locally
  const leases = new RateLeases(policy.onUnavailable === "open" ? policy.limit : 0);
  const take = coalescedRate(options, policy, leases);
  const prefix = `rl:${policy.name}:`;
  const policyHeader = `"${policy.name}";q=${policy.limit};w=${policy.windowSeconds}`;
  const name = `"${policy.name}"`;
  const stateHeader = (outcome: RateOutcome) =>
    `${name};r=${outcome.remaining};t=${Math.ceil(outcome.resetMs / 1000)}`;
  let lastOpenLog = 0;
  const answer = (c: Context<AppEnv>, next: Next, outcome: RateOutcome) => {
    const state = stateHeader(outcome);
    // appended, so a route under several policies lists them all (the refusal keeps them too)
    c.header("ratelimit-policy", policyHeader, { append: true });
    c.header("ratelimit", state, { append: true });
    if (!outcome.allowed) {
      const retryAfter = Math.max(1, Math.ceil(outcome.retryAfterMs / 1000));
      throw new AppError(
        "rate_limited",
        `Rate limit "${policy.name}" exceeded. Retry after ${retryAfter} s.`,
        { retryAfterSeconds: retryAfter },
      );
    }
    return next();
  };
  /** The store's decision on `key`; null when it is unreachable and the policy lets requests through. */
  const stored = async (key: string): Promise<RateOutcome | null> => {
    try {
      return await take(key);
    } catch (error) {
      if (policy.onUnavailable === "closed") {
        options.logger.error("rate-limit store unavailable; failing closed", {
          policy: policy.name,
          error,
        });
        throw new AppError("unavailable", "Temporarily unavailable, try again shortly.", {
          retryAfterSeconds: 5,
        });
      }
      const now = Date.now();
      if (now - lastOpenLog > 30_000) {
        lastOpenLog = now;
        options.logger.warn("rate-limit store unavailable; letting requests through", {
          policy: policy.name,
          error,
        });
      }
      return null;
    }
  };
  const fromStore = async (c: Context<AppEnv>, next: Next, key: string) => {
    const outcome = await stored(key);
    return outcome === null ? next() : answer(c, next, outcome);
  };
  return {
    policy,
    stateHeader,
    policyHeader,
    leased: (bucket) => leases.take(prefix + bucket, epochMs(options.clock)),
    decided: (bucket) => stored(prefix + bucket),
    // a permit from the process's lease is decided without an await (most requests of a busy client)
    middleware:
      (partition = byClientIp) =>
      (c, next) => {
        const bucket = partition(c);
        if (bucket === null) return next();
        const key = prefix + bucket;
        const leased = leases.take(key, epochMs(options.clock));
        return leased === undefined ? fromStore(c, next, key) : answer(c, next, leased);
      },
  };
}

/** `rateLimiter(policy, options).middleware(partition)`: a limiter of its own, as middleware. */
export function rateLimit(
  policy: RateLimitPolicy,
  options: RateLimitOptions,
  partition: Partition = byClientIp,
): MiddlewareHandler<AppEnv> {
  return rateLimiter(policy, options).middleware(partition);
}

/** The caller's tenant (a tenant user's, or an API key's); platform staff are not counted. */
export const byTenant: Partition = (c) => c.get("principal")?.tenantId ?? null;

/**
 * The per-tenant limit: one bucket per tenant, whoever calls and from wherever (all its users and
 * keys together), of the size its plan gives (`rate_limit_per_minute`, `limitOf`: null, not
 * limited). Named `tenant` in `RateLimit-Policy` and `RateLimit`; a refused request gets 429
 * `rate_limited` like the others. A limiter per distinct limit (a handful: one per plan and override).
 */
export function tenantRateLimit(
  limitOf: (tenantId: string) => number | null | Promise<number | null>,
  options: RateLimitOptions,
): MiddlewareHandler<AppEnv> {
  const limiters = new Map<number, MiddlewareHandler<AppEnv>>();
  return async (c, next) => {
    const tenantId = c.get("principal")?.tenantId;
    if (!tenantId) return next();
    let limit = limitOf(tenantId);
    if (limit instanceof Promise) limit = await limit;
    if (limit === null) return next();
    let limiter = limiters.get(limit);
    if (!limiter) {
      limiter = rateLimit(
        { name: "tenant", limit, windowSeconds: 60, onUnavailable: "open" },
        options,
        byTenant,
      );
      limiters.set(limit, limiter);
    }
    return limiter(c, next);
  };
}

/**
 * Advertises the security windows a route counts against (password, SMS: src/security/windows.ts)
 * as `RateLimit-Policy` entries next to the request limiters', so every limit that can answer 429
 * is a listed policy. The windows decide in the domain; a window's 429 names its policy in
 * `RateLimit` (`problemJson`, from the error's `rateLimit`).
 */
export function advertisePolicies(
  policies: { name: string; limit: number; windowSeconds: number }[],
): MiddlewareHandler<AppEnv> {
  const entries = policies.map((p) => `"${p.name}";q=${p.limit};w=${p.windowSeconds}`);
  return async (c, next) => {
    for (const entry of entries) c.header("ratelimit-policy", entry, { append: true });
    await next();
  };
}
