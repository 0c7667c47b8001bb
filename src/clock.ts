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
