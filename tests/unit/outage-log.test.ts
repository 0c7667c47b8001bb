import { expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { createOutageLog } from "../../src/db/outage-log.ts";
import { createIntervalRunner } from "../../src/jobs/interval-runner.ts";
import type { Logger } from "../../src/telemetry/logger.ts";
import { waitFor } from "../helpers/jobs.ts";

interface Line {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}
function recordingLogger(lines: Line[]): Logger {
  const at =
    (level: string) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      lines.push({ level, msg, fields });
  const logger: Logger = {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    request() {},
    enabled: () => true,
    child: () => logger,
    flush() {},
  };
  return logger;
}

/** What postgres.js rejects with when the server refuses the connection. */
function refused(): Error {
  return Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
}

test("a database outage: one line naming the cause, then one a minute with the count, then the recovery", () => {
  const clock = new ManualClock("2026-11-23T00:00:00Z");
  const lines: Line[] = [];
  const log = createOutageLog({
    logger: recordingLogger(lines),
    what: "loop tick",
    fields: { loop: "subscriptions" },
    now: () => clock.now().getTime(),
  });
  log.failed(refused());
  expect(lines).toEqual([
    {
      level: "error",
      msg: "loop tick failed",
      fields: {
        loop: "subscriptions",
        cause: "host unreachable",
        code: "ECONNREFUSED",
        error: "connect ECONNREFUSED 127.0.0.1:5432",
      },
    },
  ]);
  for (let second = 1; second < 60; second++) {
    clock.advance(1_000);
    log.failed(refused());
  }
  expect(lines).toHaveLength(1); // 59 more failures within the minute: silent
  clock.advance(1_000);
  log.failed(refused());
  expect(lines[1]).toMatchObject({
    level: "error",
    msg: "loop tick still failing",
    fields: { loop: "subscriptions", failures: 61, sinceSeconds: 60, cause: "host unreachable" },
  });
  clock.advance(5_000);
  log.succeeded();
  log.succeeded();
  expect(lines.slice(2)).toEqual([
    {
      level: "info",
      msg: "loop tick recovered",
      fields: { loop: "subscriptions", failures: 61, downSeconds: 65 },
    },
  ]);
});

test("a PostgreSQL error wrapped by drizzle is named by its class and SQLSTATE", () => {
  const lines: Line[] = [];
  const log = createOutageLog({ logger: recordingLogger(lines), what: "database check" });
  const cause = Object.assign(new Error('database "plinth" does not exist'), { code: "3D000" });
  log.failed(new Error("Failed query: select 1", { cause }));
  expect(lines[0]?.fields).toMatchObject({ cause: "database missing", code: "3D000" });
});

test("the interval runner logs a tick failing every round once, and its recovery", async () => {
  const lines: Line[] = [];
  let ticks = 0;
  const runner = createIntervalRunner({
    name: "t",
    intervalMs: 1,
    jitter: 0,
    logger: recordingLogger(lines),
    now: () => 0, // the minute never passes
    tick: async () => {
      ticks++;
      if (ticks <= 20) throw refused();
    },
  });
  runner.start();
  await waitFor(() => ticks > 21, { what: "ticks after the outage" });
  await runner.stop();
  expect(lines.map((l) => l.msg)).toEqual(["loop tick failed", "loop tick recovered"]);
  expect(lines[1]?.fields).toMatchObject({ loop: "t", failures: 20 });
});
