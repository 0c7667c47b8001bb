import type { Logger } from "../telemetry/logger.ts";
import { describeDatabaseFailure, isConnectionFailure } from "./database-failure.ts";

/** Repeated failures are logged once a minute, with a count. */
export const OUTAGE_REPEAT_MS = 60_000;

export interface OutageLog {
  /** A round failed: logged at once the first time, then once per `repeatMs` with the count. */
  failed(error: unknown): void;
  /** A round succeeded: after failures, says so once, with how many and for how long. */
  succeeded(): void;
  readonly failures: number;
}

/**
 * Logging for something that runs every few seconds and may keep failing (a loop whose database is
 * down): one line when it starts failing, naming the cause (the connection failure's class and
 * code), then one a minute with the count, and one when it recovers; never a line per round.
 */
export function createOutageLog(options: {
  logger: Logger;
  /** `loop tick` → "loop tick failed", "loop tick still failing", "loop tick recovered". */
  what: string;
  fields?: Record<string, unknown>;
  now?: () => number;
  repeatMs?: number;
}): OutageLog {
  const now = options.now ?? Date.now;
  const repeatMs = options.repeatMs ?? OUTAGE_REPEAT_MS;
  let failures = 0;
  let since = 0;
  let lastLogged = 0;
  const cause = (error: unknown): Record<string, unknown> => {
    const failure = describeDatabaseFailure(error);
    // a connection failure by its class and code; anything else as the error it is
    return isConnectionFailure(failure)
      ? { cause: failure.class, code: failure.code, error: failure.message }
      : { error };
  };
  return {
    failed(error) {
      const at = now();
      failures++;
      if (failures === 1) {
        since = at;
        lastLogged = at;
        options.logger.error(`${options.what} failed`, { ...options.fields, ...cause(error) });
      } else if (at - lastLogged >= repeatMs) {
        lastLogged = at;
        options.logger.error(`${options.what} still failing`, {
          ...options.fields,
          failures,
          sinceSeconds: Math.round((at - since) / 1000),
          ...cause(error),
        });
      }
    },
    succeeded() {
      if (failures === 0) return;
      options.logger.info(`${options.what} recovered`, {
        ...options.fields,
        failures,
        downSeconds: Math.round((now() - since) / 1000),
      });
      failures = 0;
    },
    get failures() {
      return failures;
    },
  };
}
