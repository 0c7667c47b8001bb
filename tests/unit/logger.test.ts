import { expect, test } from "bun:test";
import { createRedactor, REDACTED } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";

const SECRET = "hunter2-very-secret-value";
const NOW = new Date("2026-11-22T10:00:00.000Z");

function capture(level: "debug" | "info" | "warn" | "error" = "debug") {
  const lines: string[] = [];
  const logger = createLogger({
    level,
    redactor: createRedactor([SECRET]),
    write: (line) => lines.push(line),
    now: () => NOW,
  });
  return { logger, lines, parsed: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

test("a line is one JSON object: time, level, message, then the fields in order", () => {
  const { logger, lines } = capture();
  logger.info("request", { method: "GET", path: "/api/health", status: 200, durationMs: 0.12 });
  expect(lines).toEqual([
    '{"time":"2026-11-22T10:00:00.000Z","level":"info","msg":"request","method":"GET","path":"/api/health","status":200,"durationMs":0.12}',
  ]);
});

test("strings JSON must escape are escaped, whatever they hold", () => {
  const { logger, lines, parsed } = capture();
  const awkward = [
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab",
    "\u0001ctl",
    "é ü 日本",
    "lone \ud800 half",
    "😀",
  ];
  for (const value of awkward) logger.info(value, { value });
  expect(parsed().map((line) => [line.msg, line.value])).toEqual(awkward.map((value) => [value, value]));
  expect(lines.every((line) => !line.includes("\n"))).toBe(true);
});

test("values of every kind come out as JSON.stringify would, and a log call never throws", () => {
  const { logger, parsed } = capture();
  const when = new Date("2026-01-02T03:04:05.000Z");
  logger.info("kinds", {
    nan: Number.NaN,
    inf: Number.POSITIVE_INFINITY,
    yes: true,
    none: null,
    missing: undefined,
    fn: () => 1,
    big: 12345678901234567890n,
    when,
    list: [1, "two", { three: 3 }],
    nested: { deep: { count: 2, big: 5n } },
  });
  expect(parsed()[0]).toEqual({
    time: NOW.toISOString(),
    level: "info",
    msg: "kinds",
    nan: null,
    inf: null,
    yes: true,
    none: null,
    big: "12345678901234567890",
    when: "2026-01-02T03:04:05.000Z",
    list: [1, "two", { three: 3 }],
    nested: { deep: { count: 2, big: "5" } },
  });
});

test("secret-named fields and secret values are redacted, flat or nested, in fields and in the message", () => {
  const { logger, lines, parsed } = capture();
  logger.warn(`failed with ${SECRET}`, {
    password: "whatever",
    apiKey: 42,
    token: false,
    note: `the value ${SECRET} leaked`,
    url: "postgres://app:pw-in-url@db/x",
    nested: { authorization: "Bearer abcdefghijkl", text: SECRET },
    error: new Error(`query failed: ${SECRET}`),
  });
  expect(lines.join("\n")).not.toContain(SECRET);
  expect(lines.join("\n")).not.toContain("pw-in-url");
  const line = parsed()[0] as Record<string, unknown>;
  expect(line.msg).toBe(`failed with ${REDACTED}`);
  expect(line).toMatchObject({
    password: REDACTED,
    apiKey: REDACTED,
    token: false,
    note: `the value ${REDACTED} leaked`,
    url: `postgres://app:${REDACTED}@db/x`,
    nested: { authorization: REDACTED, text: REDACTED },
  });
  expect((line.error as { message: string }).message).toBe(`query failed: ${REDACTED}`);
});

test("child loggers add their fields; a field named like a reserved or inherited key replaces it", () => {
  const { logger, parsed } = capture();
  const child = logger.child({ process: "worker", secret: "child-secret" });
  child.info("started", { slot: 1 });
  child.info("shadowed", { process: "other", level: "custom" });
  const [first, second] = parsed();
  expect(first).toEqual({
    time: NOW.toISOString(),
    level: "info",
    msg: "started",
    process: "worker",
    secret: REDACTED,
    slot: 1,
  });
  expect(second).toMatchObject({ process: "other", level: "custom", msg: "shadowed", secret: REDACTED });
  expect(Object.keys(second as object).filter((key) => key === "process")).toHaveLength(1);
});

test("lines below the level are dropped", () => {
  const { logger, parsed } = capture("warn");
  logger.debug("no");
  logger.info("no");
  logger.warn("yes");
  logger.error("yes too");
  expect(parsed().map((line) => line.level)).toEqual(["warn", "error"]);
});

test('the request line is byte for byte the line info/error("request", entry) writes', () => {
  const entries = [
    { method: "GET", path: "/api/health", status: 200, durationMs: 0.12, requestId: crypto.randomUUID() },
    {
      method: "POST",
      path: `/api/reset/${SECRET}`,
      status: 503,
      durationMs: 12.5,
      requestId: `id-${SECRET}`,
    },
    { method: "PATCH", path: '/quote"and\\back\nslash', status: 404, durationMs: Number.NaN, requestId: "x" },
    { method: "GET", path: "/Bearer abcdefghijkl", status: 500, durationMs: 1, requestId: "y" },
    // a probe that passed is a debug line; one that failed is an error like any other
    { method: "GET", path: "/api/health", status: 200, durationMs: 0.2, requestId: "p", probe: true },
    { method: "GET", path: "/api/health/ready", status: 503, durationMs: 3, requestId: "q", probe: true },
  ];
  for (const level of ["debug", "info", "warn", "error"] as const) {
    const fast = capture(level);
    const generic = capture(level);
    for (const { probe, ...entry } of entries) {
      fast.logger.request({ ...entry, probe });
      const { status } = entry;
      if (status >= 500) generic.logger.error("request", { ...entry });
      else if (probe) generic.logger.debug("request", { ...entry });
      else generic.logger.info("request", { ...entry });
    }
    expect(fast.lines).toEqual(generic.lines);
    // and a child's own fields come along, as on any other line
    fast.logger.child({ process: "api" }).request(entries[0] as (typeof entries)[0]);
    generic.logger.child({ process: "api" }).info("request", { ...entries[0] });
    fast.logger.child({ process: "api" }).request(entries[4] as (typeof entries)[4]);
    const { probe: _probe, ...probeFields } = entries[4] as (typeof entries)[4];
    generic.logger.child({ process: "api" }).debug("request", probeFields);
    expect(fast.lines).toEqual(generic.lines);
  }
  // the passing probe's line only at debug
  expect(capture("info").logger.enabled("debug")).toBe(false);
  const debug = capture("debug");
  debug.logger.request(entries[4] as (typeof entries)[4]);
  expect(debug.parsed()).toMatchObject([{ level: "debug", path: "/api/health", status: 200 }]);
  expect(debug.lines[0]).not.toContain("probe");
  const { logger, lines } = capture();
  logger.request(entries[1] as (typeof entries)[1]);
  expect(lines[0]).not.toContain(SECRET);
});

test("the request line's duration is written as JSON.stringify writes it, every hundredth and the odd value", () => {
  const durations = [0, -0, 0.01, 0.1, 0.29, 1.05, 7, 10.1, 99.99, 123456.78, 1e10 + 0.01, 1e12, 2 ** 53];
  for (let h = 0; h < 100_000; h += 7) durations.push(Math.round(h * 1.37) / 100);
  durations.push(0.123, -1.5, Number.POSITIVE_INFINITY, Number.NaN, 1e21, 5e-7);
  const { logger, lines } = capture();
  for (const durationMs of durations)
    logger.request({ method: "GET", path: "/", status: 200, durationMs, requestId: "r" });
  expect(lines.map((line) => JSON.parse(line).durationMs)).toEqual(
    durations.map((d) => JSON.parse(JSON.stringify(d))),
  );
  expect(lines.map((line) => /"durationMs":([^,]*),/.exec(line)?.[1])).toEqual(
    durations.map((d) => JSON.stringify(d)),
  );
});
