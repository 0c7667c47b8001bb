/** Where "now" comes from. Leases, backoff and grace periods take one so tests move time by hand. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock tests set and advance. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start: Date | string | number = Date.now()) {
    this.#now = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.#now);
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
