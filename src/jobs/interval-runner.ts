import { createOutageLog } from "../db/outage-log.ts";
import type { Logger } from "../telemetry/logger.ts";

export interface IntervalRunnerOptions {
  name: string;
  /** Pause between ticks when a tick reports no more work. */
  intervalMs: number;
  /** ±this fraction of the interval, at random, so processes started together drift apart. Default 0.1. */
  jitter?: number;
  /**
   * One round of work; it claims what it works on with its own lease query, so any number of
   * processes can run the same loop. Resolves `true` when there may be more to do at once.
   */
  tick: () => Promise<boolean | undefined> | Promise<void>;
  logger?: Logger;
  random?: () => number;
  /** Milliseconds now, for the once-a-minute repeat of a failing tick's log line; default Date.now. */
  now?: () => number;
}

export interface IntervalRunner {
  start(): void;
  /** Runs a tick now (or right after the current one) instead of waiting for the interval. */
  wake(): void;
  /** No new ticks; resolves when the current one has finished. */
  stop(): Promise<void>;
  readonly running: boolean;
}

/** A `setInterval` that never overlaps ticks, jitters its interval and can be woken early. */
export function createIntervalRunner(options: IntervalRunnerOptions): IntervalRunner {
  const jitter = options.jitter ?? 0.1;
  const random = options.random ?? Math.random;
  let started = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let current: Promise<void> | undefined;
  let wakeRequested = false;
  // a tick that keeps failing (database down) logs once, then once a minute, then its recovery
  const outage = options.logger
    ? createOutageLog({
        logger: options.logger,
        what: "loop tick",
        fields: { loop: options.name },
        now: options.now,
      })
    : undefined;

  const delay = () => Math.max(0, Math.round(options.intervalMs * (1 + jitter * (2 * random() - 1))));

  const schedule = (ms: number) => {
    clearTimeout(timer);
    timer = setTimeout(run, ms);
  };

  function run(): void {
    if (!started || current) return;
    clearTimeout(timer);
    current = (async () => {
      let more = false;
      try {
        more = (await options.tick()) === true;
        outage?.succeeded();
      } catch (error) {
        outage?.failed(error);
      }
      current = undefined;
      if (!started) return;
      if (more || wakeRequested) {
        wakeRequested = false;
        schedule(0);
      } else schedule(delay());
    })();
  }

  return {
    start() {
      if (started) return;
      started = true;
      run();
    },
    wake() {
      if (!started) return;
      if (current) wakeRequested = true;
      else run();
    },
    async stop() {
      started = false;
      clearTimeout(timer);
      await current;
    },
    get running() {
      return started;
    },
  };
}
