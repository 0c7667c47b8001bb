import { Cron } from "croner";
import type { CatchUpPolicy } from "../db/schema/jobs.ts";
import { AppError } from "../errors.ts";

/** A slot due at most this long ago is on time, not missed: `skip` still runs it. */
export const ON_TIME_MS = 60_000;

/** True for a time zone name the runtime knows (IANA, e.g. `Europe/Berlin`, or `UTC`). */
export function validTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone }).format(0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Parses a cron expression (five fields, or six with seconds first) in an IANA time zone; an
 * invalid one is a `validation_failed` naming the field (`cron` or `timeZone`).
 */
export function parseCron(cron: string, timeZone: string): Cron {
  if (!validTimeZone(timeZone))
    throw new AppError("validation_failed", `"${timeZone}" is not an IANA time zone.`, {
      fields: [{ path: "timeZone", message: "not an IANA time zone (e.g. Europe/Berlin, UTC)" }],
    });
  try {
    return new Cron(cron, { timezone: timeZone, paused: true, mode: "5-or-6-parts" });
  } catch (error) {
    throw new AppError("validation_failed", "The cron expression is not valid.", {
      fields: [{ path: "cron", message: (error as Error).message.slice(0, 300) }],
    });
  }
}

/** The next `count` slots strictly after `from`. */
export function nextSlots(cron: Cron, from: Date, count: number): Date[] {
  return cron.nextRuns(count, from);
}

export interface DuePlan {
  /** The slots to enqueue, oldest first. */
  enqueue: Date[];
  /** The new `last_slot`: the latest due slot (null: nothing is due). */
  lastSlot: Date | null;
  /** Due slots not enqueued (missed under `skip`, folded under `once`, beyond the bound under `all`). */
  dropped: number;
}

/**
 * What one tick does for one schedule: the slots in (`after`, `now`] and the catch-up policy.
 * `skip`: only the latest slot, and only when it is on time (due within `ON_TIME_MS`); the missed
 * ones are dropped, so after downtime the next future slot is the next run. `once`: one run, named
 * by the latest due slot, for all of them. `all`: every due slot, the latest `maxRuns` of them.
 */
export function planDueSlots(
  cron: Cron,
  input: { after: Date; now: Date; catchUp: CatchUpPolicy; maxRuns: number },
): DuePlan {
  const { after, now } = input;
  // croner's previousRuns counts back from a reference (bounded work however long the downtime
  // was, where stepping forward from `after` would not); it leaves out a slot exactly at the
  // reference, so the reference is a millisecond after `now`
  const reference = new Date(now.getTime() + 1);
  const [latest] = cron.previousRuns(1, reference);
  if (!latest || latest.getTime() <= after.getTime()) return { enqueue: [], lastSlot: null, dropped: 0 };
  const window = input.catchUp === "all" ? input.maxRuns + 1 : 2;
  const recent = cron
    .previousRuns(window, reference)
    .filter((slot) => slot.getTime() > after.getTime())
    .reverse();
  // `recent` holds up to `window` due slots; one more than kept means at least that many were dropped
  const more = recent.length === window ? 1 : 0;
  switch (input.catchUp) {
    case "skip": {
      const onTime = now.getTime() - latest.getTime() <= ON_TIME_MS;
      return {
        enqueue: onTime ? [latest] : [],
        lastSlot: latest,
        dropped: recent.length - (onTime ? 1 : 0) + more,
      };
    }
    case "once":
      return { enqueue: [latest], lastSlot: latest, dropped: recent.length - 1 + more };
    case "all": {
      const kept = recent.slice(-input.maxRuns);
      return { enqueue: kept, lastSlot: latest, dropped: recent.length - kept.length };
    }
  }
}
