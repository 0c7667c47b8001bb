import { expect, test } from "bun:test";
import { createIntervalRunner } from "../../src/jobs/interval-runner.ts";
import { waitFor } from "../helpers/jobs.ts";

test("ticks at start, never overlaps, and a wake during a tick runs one more right after", async () => {
  let active = 0;
  let maxActive = 0;
  let ticks = 0;
  let release: () => void = () => {};
  const runner = createIntervalRunner({
    name: "t",
    intervalMs: 60_000,
    tick: async () => {
      ticks++;
      active++;
      maxActive = Math.max(maxActive, active);
      await new Promise<void>((r) => (release = r));
      active--;
    },
  });
  runner.start();
  expect(ticks).toBe(1);
  runner.wake();
  runner.wake();
  expect(ticks).toBe(1);
  release();
  await waitFor(() => ticks === 2, { what: "the woken tick" });
  release();
  const stopped = runner.stop();
  await stopped;
  expect(maxActive).toBe(1);
  expect(ticks).toBe(2); // the 60 s interval has not passed
  runner.wake();
  expect(ticks).toBe(2); // stopped: wake does nothing
});

test("a tick that reports more work runs again at once; otherwise the jittered interval applies", async () => {
  let ticks = 0;
  const runner = createIntervalRunner({
    name: "t",
    intervalMs: 60_000,
    tick: async () => {
      ticks++;
      return ticks < 5;
    },
  });
  runner.start();
  await waitFor(() => ticks === 5, { what: "five ticks back to back" });
  await runner.stop();
  expect(ticks).toBe(5);
});

test("a failing tick is logged and the loop goes on", async () => {
  let ticks = 0;
  const errors: unknown[] = [];
  const logger = {
    debug() {},
    info() {},
    warn() {},
    error: (_m: string, f?: Record<string, unknown>) => errors.push(f?.error),
    request() {},
    enabled: () => true,
    child() {
      return logger;
    },
    flush() {},
  };
  const runner = createIntervalRunner({
    name: "t",
    intervalMs: 5,
    jitter: 0,
    logger,
    tick: async () => {
      ticks++;
      if (ticks === 1) throw new Error("boom");
    },
  });
  runner.start();
  await waitFor(() => ticks >= 2, { what: "a tick after the failure" });
  await runner.stop();
  expect(errors).toHaveLength(1);
});
