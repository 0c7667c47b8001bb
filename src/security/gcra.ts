import { CLOCK_STEP_BACK_MS } from "../clock.ts";
import type { RateOutcome } from "./counter-store.ts";

// The token-bucket (GCRA) arithmetic every counter store shares (src/security/counter-store.ts:
// the cache, the database, memory); the cache's script (src/cache/scripts.ts) holds the same rules.

/**
 * GCRA in microseconds: `interval` per permit (the window over the limit, rounded down to a whole
 * microsecond, at least 1) and a burst of exactly `limit`. The bucket holds `limit * interval`
 * (returned as `windowUs`, what the decisions below and the script measure against), not the
 * window: with the interval rounded down, the window alone would hold more than `limit` permits
 * (60 s / 9,999 holds 10,000; 1 s / 300,000 holds 333,333).
 */
export function gcraParams(limit: number, windowMs: number) {
  const intervalUs = Math.max(1, Math.floor((windowMs * 1000) / limit));
  return { windowUs: limit * intervalUs, intervalUs };
}

/**
 * The TAT a decision at `nowUs` starts from: the stored one, or now when there is none or it is past
 * (a full bucket). Granting never moves a TAT more than a window ahead of the clock that grants, so
 * one further ahead than that and `CLOCK_STEP_BACK_MS` (src/clock.ts) was stamped by a clock since put back.
 */
export function gcraStart(storedUs: number | null | undefined, nowUs: number, windowUs: number): number {
  if (storedUs === null || storedUs === undefined || storedUs < nowUs) return nowUs;
  return storedUs - nowUs > windowUs + CLOCK_STEP_BACK_MS * 1000 ? nowUs : storedUs;
}

/** Outcome from the TAT relative to now after the decision. */
function gcraOutcome(allowed: boolean, tatRelUs: number, intervalUs: number, windowUs: number): RateOutcome {
  if (allowed) {
    return {
      allowed,
      remaining: Math.max(0, Math.floor((windowUs - tatRelUs) / intervalUs)),
      resetMs: Math.ceil(tatRelUs / 1000),
      retryAfterMs: 0,
    };
  }
  return {
    allowed,
    remaining: 0,
    resetMs: Math.ceil(tatRelUs / 1000),
    retryAfterMs: Math.max(1, Math.ceil((tatRelUs + intervalUs - windowUs) / 1000)),
  };
}

/** How many of `count` permits the bucket grants with its TAT `tatRelUs` ahead of now (>= 0). */
export function gcraGranted(count: number, tatRelUs: number, intervalUs: number, windowUs: number): number {
  return Math.max(0, Math.min(count, Math.floor((windowUs - tatRelUs) / intervalUs)));
}

/**
 * The outcomes of `count` requests at one instant, in order, when `granted` of them got a permit
 * and the TAT was `tatRelUs` ahead of now before them: each granted request moves the TAT one
 * interval on; the refused ones see the TAT after the last grant.
 */
export function gcraOutcomes(
  count: number,
  granted: number,
  tatRelUs: number,
  intervalUs: number,
  windowUs: number,
): RateOutcome[] {
  const outcomes: RateOutcome[] = [];
  for (let i = 0; i < count; i++) {
    outcomes.push(
      i < granted
        ? gcraOutcome(true, tatRelUs + (i + 1) * intervalUs, intervalUs, windowUs)
        : gcraOutcome(false, tatRelUs + granted * intervalUs, intervalUs, windowUs),
    );
  }
  return outcomes;
}
