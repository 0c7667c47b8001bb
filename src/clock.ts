/** Where "now" comes from. Leases, backoff and grace periods take one so tests move time by hand. */
export interface Clock {
  now(): Date;
  /**
   * `now().getTime()` without making a Date: for the checks a request makes on every call (a
   * cache's expiry, a lease); a clock without it is read through `now()` (`epochMs`).
   */
  nowMs?(): number;
}

export const systemClock: Clock = { now: () => new Date(), nowMs: Date.now };

/** The clock's time in milliseconds since the epoch, without a Date when the clock can say it. */
export const epochMs = (clock: Clock): number =>
  clock.nowMs === undefined ? clock.now().getTime() : clock.nowMs();

/**
 * How far ahead of the caller's clock a stored time may be and still be taken as it was written:
 * another host's clock a little ahead, never a minute. Further ahead, it was written by a clock that
 * has since gone back (an NTP step, a resumed VM, a test's clock put back), and is not waited out:
 * a GCRA bucket starts again full (`gcraStart`, src/security/gcra.ts), a sliding log's attempt
 * counts as made now (`decideWindows`), an in-process cache's entry is stale (`isFresh`). The
 * cache's scripts (src/cache/scripts.ts) hold the same 60,000 ms.
 */
export const CLOCK_STEP_BACK_MS = 60_000;

/**
 * Whether what was stamped at `atMs` is still younger than `ttlMs` at `nowMs`. Stamped more than
 * `CLOCK_STEP_BACK_MS` ahead of now, it was stamped by a clock since put back and is not fresh: a
 * cache reads it again rather than serve it for its TTL plus the step.
 */
export function isFresh(atMs: number, ttlMs: number, nowMs: number): boolean {
  const age = nowMs - atMs;
  return age < ttlMs && age >= -CLOCK_STEP_BACK_MS;
}

/** A clock tests set and advance. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start: Date | string | number = Date.now()) {
    this.#now = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.#now);
  }
  nowMs(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
  set(to: Date | string | number): void {
    this.#now = new Date(to).getTime();
  }
}

/** An instant (a Date, or PostgreSQL's timestamptz text) as ISO 8601 text in UTC. */
export const isoText = (value: string | Date): string => new Date(value).toISOString();

/** `isoText`, keeping null (a column that may be empty). */
export const isoOrNull = (value: string | Date | null): string | null =>
  value === null ? null : isoText(value);
