import { expect, test } from "bun:test";
import {
  CLOCK_STEP_BACK_MS,
  type Clock,
  epochMs,
  isFresh,
  ManualClock,
  systemClock,
} from "../../src/clock.ts";

test("a clock's milliseconds are its Date's time, when moved and set by hand too", () => {
  const clock = new ManualClock("2026-11-27T12:00:00.250Z");
  expect(epochMs(clock)).toBe(clock.now().getTime());
  clock.advance(11 * 60_000);
  expect(epochMs(clock)).toBe(Date.parse("2026-11-27T12:11:00.250Z"));
  clock.set("2026-11-27T11:50:00Z");
  expect(epochMs(clock)).toBe(clock.now().getTime());
});

test("a clock that only says now() is read through its Date", () => {
  const behind: Clock = { now: () => new Date(Date.parse("2026-01-01T00:00:00Z")) };
  expect(epochMs(behind)).toBe(Date.parse("2026-01-01T00:00:00Z"));
});

test("the system clock's milliseconds are the process's", () => {
  const before = Date.now();
  const ms = epochMs(systemClock);
  expect(ms).toBeGreaterThanOrEqual(before);
  expect(ms).toBeLessThanOrEqual(Date.now());
});

test("isFresh: younger than the TTL, and stamped at most CLOCK_STEP_BACK_MS ahead of now", () => {
  const at = Date.parse("2026-11-27T12:00:00Z");
  expect(isFresh(at, 30_000, at)).toBe(true);
  expect(isFresh(at, 30_000, at + 29_999)).toBe(true);
  expect(isFresh(at, 30_000, at + 30_000)).toBe(false);
  // a clock a little behind the stamp: taken as written
  expect(isFresh(at, 30_000, at - CLOCK_STEP_BACK_MS)).toBe(true);
  // further behind: stamped by a clock since put back, read again
  expect(isFresh(at, 30_000, at - CLOCK_STEP_BACK_MS - 1)).toBe(false);
  expect(isFresh(at, 30_000, at - 3_600_000)).toBe(false);
});
