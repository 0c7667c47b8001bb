import { expect, test } from "bun:test";
import { createGeneratorSync } from "json-schema-faker";
import { API_CRON, API_CRON_PATTERN } from "../../src/jobs/cron-pattern.ts";
import { nextSlots, parseCron } from "../../src/jobs/schedule-slots.ts";

// The admin API's cron form is one regular expression (the document's `pattern`, the route's check):
// croner, which parses it, must accept every expression it matches, or a schema-valid request
// would be refused for a reason the document does not state. The same generator as the contract
// fuzz test (json-schema-faker over the pattern, seeded) makes the expressions.

test("croner parses every expression the API's cron pattern matches", () => {
  const generator = createGeneratorSync({ seed: 20261126 });
  const seen = new Set<string>();
  for (let i = 0; i < 3_000; i++) {
    const cron = generator.generate({ type: "string", pattern: API_CRON_PATTERN }) as string;
    expect(API_CRON.test(cron), cron).toBe(true);
    seen.add(cron);
    expect(() => parseCron(cron, "UTC"), cron).not.toThrow();
  }
  expect(seen.size).toBeGreaterThan(2_500);
});

test("the pattern takes the usual forms and refuses what croner would refuse or the API leaves out", () => {
  for (const cron of [
    "0 3 * * *",
    "*/15 * * * *",
    "0 30 2 * * *",
    "0 9 * * 1-5",
    "0 0 1,15 * *",
    "0 05 * * 0-7",
    "1-59/5 * * * *",
    "0 0 0 29 2 *",
    "30 0-23/2 * * *",
  ])
    expect(API_CRON.test(cron), cron).toBe(true);
  for (const cron of [
    "* * * * * *", // every second: a seconds field is one value
    "*/5 * * * * *",
    "5-3 * * * *", // a range runs low to high (croner refuses it)
    "60 * * * *",
    "0 24 * * *",
    "0 0 0 * *",
    "0 0 * 13 *",
    "0 0 * * 8",
    "*/0 * * * *",
    "0 0 L * *",
    "0 0 * * MON",
    "0 0 ? * *",
    "0  0 * * *",
    "0 0 * * * * 2030",
    "",
  ])
    expect(API_CRON.test(cron), cron).toBe(false);
  // 0 and 7 are both Sunday
  const sundays = (cron: string) =>
    nextSlots(parseCron(cron, "UTC"), new Date("2030-01-01T00:00:00Z"), 2).map((d) => d.toISOString());
  expect(sundays("0 12 * * 7")).toEqual(sundays("0 12 * * 0"));
});
