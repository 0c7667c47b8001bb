import { sql } from "drizzle-orm";
import type { Clock } from "../clock.ts";
import type { Logger } from "../telemetry/logger.ts";
import { type Executor, execute } from "./client.ts";

export interface DatabaseClock extends Clock {
  /** The database's clock minus this host's, in milliseconds, as last measured. */
  readonly offsetMs: number;
  /** Measures the offset again now (also done every `refreshMs`). */
  refresh(): Promise<void>;
  stop(): void;
}

/**
 * The database's clock, read through this host's: `hostNow()` plus the offset to PostgreSQL's
 * `clock_timestamp()`, measured at start and every `refreshMs`, each time the best of three round
 * trips (the offset is taken at the middle of the fastest one, so its error is under half of it).
 *
 * Background leases (jobs, tenant domains, reconciliation) are written by one host and compared
 * by another: timed by each host's own clock, a host whose clock runs ahead would take over work
 * whose lease still holds. Timed by this clock they share the database's. A host more than
 * `warnMs` off is logged, so the operator can fix its time service. A failed measurement keeps
 * the last offset.
 */
export async function databaseClock(
  db: Executor,
  logger: Logger,
  options: { refreshMs?: number; warnMs?: number; hostNow?: () => number } = {},
): Promise<DatabaseClock> {
  const hostNow = options.hostNow ?? Date.now;
  const warnMs = options.warnMs ?? 1_000;
  let offsetMs = 0;
  let warned = false;

  const sample = async (): Promise<{ offset: number; roundTrip: number }> => {
    const before = hostNow();
    const [row] = await execute<{ ms: string }>(
      db,
      sql`select (extract(epoch from clock_timestamp()) * 1000)::text as ms`,
    );
    const after = hostNow();
    return { offset: Number(row?.ms) - (before + after) / 2, roundTrip: after - before };
  };
  const refresh = async () => {
    let best: { offset: number; roundTrip: number } | undefined;
    for (let i = 0; i < 3; i++) {
      const next = await sample();
      if (!best || next.roundTrip < best.roundTrip) best = next;
    }
    if (!best || !Number.isFinite(best.offset)) return;
    offsetMs = Math.round(best.offset);
    const off = Math.abs(offsetMs) > warnMs;
    if (off && !warned)
      logger.warn("this host's clock differs from the database's; background leases use the database's", {
        offsetMs,
      });
    else if (!off && warned) logger.info("this host's clock agrees with the database's again", { offsetMs });
    warned = off;
  };

  await refresh().catch((error: unknown) =>
    logger.warn("could not read the database's clock; using this host's until it can", { error }),
  );
  const timer = setInterval(
    () =>
      void refresh().catch((error: unknown) =>
        logger.debug("database clock refresh failed; keeping the last offset", { error }),
      ),
    options.refreshMs ?? 300_000,
  );
  timer.unref?.();
  return {
    now: () => new Date(hostNow() + offsetMs),
    nowMs: () => hostNow() + offsetMs,
    get offsetMs() {
      return offsetMs;
    },
    refresh,
    stop: () => clearInterval(timer),
  };
}
