import type { RateOutcome } from "./counter-store.ts";

/** Leases only for limits this large: a small budget (a login limit of 5) is decided exactly. */
export const LEASE_MIN_LIMIT = 100;
/** A lease is at most this share of the budget... */
const LEASE_MAX_SHARE = 1 / 20;
/** ...and at most this many permits. */
const LEASE_MAX = 1_000;
/** How long a lease's permits may be used; what is left then is dropped, never given out. */
export const LEASE_MS = 1_000;
/** A lease covers about this much of the bucket's recent demand in this process. */
const LEASE_DEMAND_MS = 250;
/** No lease for less than this demand (in `LEASE_DEMAND_MS`): fewer than ~16 requests a second. */
const LEASE_MIN_DEMAND = 4;
/** Buckets tracked at once; past this the table starts again (dropping leases only makes it stricter). */
const MAX_BUCKETS = 10_000;

interface Bucket {
  /** The store's outcomes for the leased permits, in order; `next` is the first not yet handed out. */
  outcomes: RateOutcome[];
  next: number;
  grantedAtMs: number;
  /** Requests this bucket saw in this process since `sinceMs` (for the next lease's size). */
  served: number;
  sinceMs: number;
  /** Whether the store's last answer left at least half the budget: only then is a lease taken. */
  far: boolean;
}

/**
 * Local leases on a shared GCRA bucket (one per rate-limit policy and process): while a client is
 * far from its budget, the store call that decides its requests also takes a few permits more, and
 * the following requests spend those here, without a round trip. Every permit still comes from
 * the shared bucket, taken atomically by `CounterStore.rate`, so all processes together never admit
 * more than the limit (a lease's permits are taken when it is granted; what a process does not use
 * within `LEASE_MS` is dropped, which can only refuse earlier, never admit more). Near the budget
 * (under half left), and for small limits, every decision is the store's again: the refusal, its
 * `Retry-After` and the last permits are exact.
 *
 * Sized to demand: about `LEASE_DEMAND_MS` of this process's recent requests for the bucket, at most
 * 1/20 of the limit and 1,000 permits; a client making fewer than ~16 requests a second gets none,
 * so what a lease can drop unused stays a small part of what its client spends.
 */
export class RateLeases {
  readonly #buckets = new Map<string, Bucket>();
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** A permit from this process's lease on `key`, or undefined: then ask the store (`extra`, `keep`). */
  take(key: string, nowMs: number): RateOutcome | undefined {
    const bucket = this.#buckets.get(key);
    if (bucket === undefined) return undefined;
    // a lease granted "later" than now was granted by a clock since put back: lapsed too
    const age = nowMs - bucket.grantedAtMs;
    if (bucket.next >= bucket.outcomes.length || age < 0 || age >= LEASE_MS) return undefined;
    bucket.served++;
    const leased = bucket.outcomes[bucket.next++] as RateOutcome;
    // a literal, not a spread: this runs on most requests of a busy client
    return age === 0
      ? leased
      : {
          allowed: leased.allowed,
          remaining: leased.remaining,
          resetMs: Math.max(0, leased.resetMs - age),
          retryAfterMs: leased.retryAfterMs,
        };
  }

  /** How many permits beyond the `count` requests at hand the next store call for `key` should take. */
  extra(key: string, count: number, nowMs: number): number {
    if (this.#limit < LEASE_MIN_LIMIT) return 0;
    const bucket = this.#buckets.get(key);
    // no demand is measured across a step back of the clock
    if (bucket === undefined || !bucket.far || nowMs < bucket.sinceMs) return 0;
    const elapsed = Math.max(1, nowMs - bucket.sinceMs);
    const demand = Math.floor(((bucket.served + count) * LEASE_DEMAND_MS) / elapsed);
    // a client with a few requests a second would mostly let its lease lapse: none for it
    if (demand < LEASE_MIN_DEMAND) return 0;
    return Math.min(demand, Math.floor(this.#limit * LEASE_MAX_SHARE), LEASE_MAX);
  }

  /**
   * Records the store's answer to `count` requests and `extra` more permits on `key`: the permits
   * granted beyond the requests become the lease.
   */
  keep(key: string, outcomes: RateOutcome[], count: number, nowMs: number): void {
    if (this.#limit < LEASE_MIN_LIMIT) return;
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      if (this.#buckets.size >= MAX_BUCKETS) this.#buckets.clear();
      bucket = { outcomes: [], next: 0, grantedAtMs: nowMs, served: 0, sinceMs: nowMs, far: false };
      this.#buckets.set(key, bucket);
    }
    let granted = count;
    while (granted < outcomes.length && outcomes[granted]?.allowed) granted++;
    const last = outcomes[granted - 1] ?? outcomes.at(-1);
    bucket.far = last?.allowed === true && last.remaining * 2 >= this.#limit;
    bucket.outcomes = granted > count ? outcomes.slice(count, granted) : [];
    bucket.next = 0;
    bucket.grantedAtMs = nowMs;
    bucket.served = 0;
    bucket.sinceMs = nowMs;
  }
}
