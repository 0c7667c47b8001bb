import { expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { LoopStatusBoard } from "../../src/loops/loop-status.ts";
import { createRedactor } from "../../src/redact.ts";

test("a loop's last tick and last error are kept, the error redacted, and kept after the loop recovers", async () => {
  const clock = new ManualClock(Date.parse("2026-11-23T10:00:00Z"));
  const board = new LoopStatusBoard({
    now: () => clock.now(),
    redact: createRedactor(["hunter2-secret"]).text,
  });
  let fail = false;
  const tick = board.wrap("subscriptions", async () => {
    if (fail) throw new Error("connect to postgres://app:hunter2-secret@db failed");
    return true;
  });
  expect(board.snapshot()).toEqual([
    { name: "subscriptions", lastTickAt: null, lastErrorAt: null, lastError: null, ticks: 0, failures: 0 },
  ]);
  expect(await tick()).toBe(true);
  clock.advance(5_000);
  fail = true;
  await expect(tick()).rejects.toThrow("connect to");
  const failedAt = clock.now();
  clock.advance(5_000);
  fail = false;
  await tick();
  const [state] = board.snapshot();
  expect(state?.ticks).toBe(3);
  expect(state?.failures).toBe(1);
  expect(state?.lastTickAt).toEqual(clock.now());
  expect(state?.lastErrorAt).toEqual(failedAt);
  expect(state?.lastError).not.toContain("hunter2-secret");
  expect(state?.lastError).toContain("[REDACTED]");
});
