import { expect, test } from "bun:test";
import { throttledWarn } from "../../src/cache/port.ts";
import { ManualClock } from "../../src/clock.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";

/**
 * The cache's connection warning (src/cache/port.ts): one line per 30 s by the injected clock. Once
 * the clock is put back (docs/cache.md, "A clock put back") the next warning is written, not held
 * back for the length of the step; a step under a minute (CLOCK_STEP_BACK_MS) is a skew and keeps
 * the throttle.
 */
const HOUR = 3_600_000;
const WINDOW = 30_000;
const start = Date.parse("2026-11-27T12:00:00Z");

function warner(clock: ManualClock) {
  const written: string[] = [];
  const logger = createLogger({
    level: "warn",
    redactor: createRedactor([]),
    write: (line) => written.push((JSON.parse(line) as { error: string }).error),
  });
  return { warn: throttledWarn(logger, "cache connection error; reconnecting", clock), written };
}

test("one line per 30 s, by the injected clock", () => {
  const clock = new ManualClock(start);
  const { warn, written } = warner(clock);
  warn(new Error("refused 1"));
  clock.advance(WINDOW - 1);
  warn(new Error("refused 2"));
  clock.advance(1);
  warn(new Error("refused 3"));
  expect(written).toEqual(["refused 1", "refused 3"]);
});

test("a clock put back an hour: the next warning after the window is written; put back 30 s, the throttle holds", () => {
  const clock = new ManualClock(start + HOUR);
  const { warn, written } = warner(clock);
  warn(new Error("an hour ahead"));
  clock.advance(-30_000); // under CLOCK_STEP_BACK_MS: a skew
  warn(new Error("30 s back"));
  clock.set(start + WINDOW);
  warn(new Error("an hour back, the window later"));
  clock.advance(WINDOW - 1);
  warn(new Error("within the new window"));
  expect(written).toEqual(["an hour ahead", "an hour back, the window later"]);
});
