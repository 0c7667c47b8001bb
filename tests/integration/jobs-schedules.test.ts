import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { type Database, execute, openDatabase } from "../../src/db/client.ts";
import type { Deps } from "../../src/deps.ts";
import {
  type CatchUpPolicy,
  defineSchedule,
  enqueueDueSlots,
  listSchedules,
  putSchedule,
  seedSchedules,
} from "../../src/jobs/schedules.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";

const t = useTestDatabase();
const ctx = systemCtx("test");
const clock = new ManualClock("2030-01-01T00:00:00Z");
let deps: Deps;
const others: Database[] = [];
const peers: Deps[] = [];

beforeAll(async () => {
  deps = await testDeps(testConfig(), { database: t.database, clock });
  // two more "API processes": their own connection pools, the same clock
  for (let i = 0; i < 2; i++) {
    const database = await openDatabase(t.url);
    others.push(database);
    peers.push(await testDeps(testConfig(), { database, clock }));
  }
});
afterAll(async () => {
  for (const database of others) await database.close();
});

async function jobsOf(name: string): Promise<string[]> {
  const rows = await execute<{ dedup_key: string }>(
    t.database.db,
    sql`select dedup_key from background_jobs where dedup_key like ${`schedule:${name}:%`} order by dedup_key`,
  );
  return rows.map((r) => r.dedup_key);
}

const slotsOf = async (name: string) =>
  (await jobsOf(name)).map((key) => key.slice(`schedule:${name}:`.length));

async function create(
  name: string,
  cron: string,
  options: { catchUp?: CatchUpPolicy; timeZone?: string } = {},
) {
  await putSchedule(deps, ctx, { name, cron, kind: "system.noop", ...options });
}

const tick = () => enqueueDueSlots(deps, ctx, { now: clock.now() });

test("three processes running the step at once enqueue each slot exactly once", async () => {
  clock.set("2030-01-01T00:00:00.500Z");
  await create("every-second", "* * * * * *");
  await create("every-second-all", "* * * * * *", { catchUp: "all" });
  for (let round = 0; round < 20; round++) {
    clock.advance(round % 3 === 0 ? 2_000 : 1_000);
    await Promise.all([deps, ...peers].map((d) => enqueueDueSlots(d, ctx, { now: clock.now() })));
  }
  const all = await slotsOf("every-second-all");
  // 20 rounds over 27 seconds: every second slot, once
  expect(all).toHaveLength(27);
  expect(new Set(all).size).toBe(27);
  expect(all[0]).toBe("2030-01-01T00:00:01.000Z");
  expect(all.at(-1)).toBe("2030-01-01T00:00:27.000Z");
  // `skip` runs only the latest slot of a round: one job per round, never two for one slot
  const skip = await slotsOf("every-second");
  expect(skip).toHaveLength(20);
  expect(new Set(skip).size).toBe(20);
  const [row] = await execute<{ last_slot: string | Date }>(
    t.database.db,
    sql`select last_slot from job_schedules where name = 'every-second-all'`,
  );
  expect(new Date(row?.last_slot ?? 0).toISOString()).toBe("2030-01-01T00:00:27.000Z");
});

describe("catch-up after downtime (every minute, down for ten and a half minutes)", () => {
  const down = async (name: string, catchUp: CatchUpPolicy) => {
    clock.set("2030-02-01T10:00:10Z");
    await create(name, "* * * * *", { catchUp });
    clock.set("2030-02-01T10:10:30Z"); // slots 10:01 … 10:10 missed; 10:10 is 30 s old: on time
    await tick();
  };

  test("skip: the missed slots are dropped, the on-time one runs, then the next future one", async () => {
    await down("catch-skip", "skip");
    expect(await slotsOf("catch-skip")).toEqual(["2030-02-01T10:10:00.000Z"]);
    clock.set("2030-02-01T10:11:00.200Z");
    await tick();
    expect(await slotsOf("catch-skip")).toEqual(["2030-02-01T10:10:00.000Z", "2030-02-01T10:11:00.000Z"]);
  });

  test("skip: after a downtime whose last slot is over a minute old, nothing runs until the next slot", async () => {
    clock.set("2030-02-01T10:00:10Z");
    await create("catch-skip-late", "*/5 * * * *");
    clock.set("2030-02-01T10:31:30Z"); // 10:30 is 90 s old: missed
    await tick();
    expect(await slotsOf("catch-skip-late")).toEqual([]);
    await tick();
    expect(await slotsOf("catch-skip-late")).toEqual([]);
    clock.set("2030-02-01T10:35:00Z");
    await tick();
    expect(await slotsOf("catch-skip-late")).toEqual(["2030-02-01T10:35:00.000Z"]);
  });

  test("once: one run, named by the latest missed slot", async () => {
    await down("catch-once", "once");
    expect(await slotsOf("catch-once")).toEqual(["2030-02-01T10:10:00.000Z"]);
    await tick();
    expect(await slotsOf("catch-once")).toHaveLength(1);
  });

  test("all: every missed slot, oldest first", async () => {
    await down("catch-all", "all");
    const slots = await slotsOf("catch-all");
    expect(slots).toHaveLength(10);
    expect(slots[0]).toBe("2030-02-01T10:01:00.000Z");
    expect(slots.at(-1)).toBe("2030-02-01T10:10:00.000Z");
  });

  test("all: bounded by BackgroundProcessing:MaxCatchUpRuns (the latest ones)", async () => {
    const bounded = await testDeps(testConfig({ settings: { "BackgroundProcessing:MaxCatchUpRuns": "3" } }), {
      database: t.database,
      clock,
    });
    clock.set("2030-02-01T10:00:10Z");
    await create("catch-bounded", "* * * * *", { catchUp: "all" });
    clock.set("2030-02-01T10:10:30Z");
    await enqueueDueSlots(bounded, ctx, { now: clock.now() });
    expect(await slotsOf("catch-bounded")).toEqual([
      "2030-02-01T10:08:00.000Z",
      "2030-02-01T10:09:00.000Z",
      "2030-02-01T10:10:00.000Z",
    ]);
  });
});

describe("DST in Europe/Berlin (croner's rules)", () => {
  const days = async (from: string, count: number) => {
    for (let day = 0; day < count; day++) {
      clock.set(new Date(new Date(from).getTime() + day * 86_400_000));
      await tick();
    }
  };

  test("02:30 daily across the March transition: on the missing hour's day it runs at 03:00 CEST", async () => {
    clock.set("2026-03-27T12:00:00Z");
    await create("berlin-march", "30 2 * * *", { timeZone: "Europe/Berlin", catchUp: "all" });
    await days("2026-03-28T12:00:00Z", 3);
    expect(await slotsOf("berlin-march")).toEqual([
      "2026-03-28T01:30:00.000Z", // 02:30 CET
      "2026-03-29T01:00:00.000Z", // 02:30 does not exist: 03:00 CEST, the first valid moment after
      "2026-03-30T00:30:00.000Z", // 02:30 CEST
    ]);
  });

  test("01:30 and 02:30 daily across the October transition: each runs once a day", async () => {
    clock.set("2026-10-23T12:00:00Z");
    await create("berlin-october", "30 1 * * *", { timeZone: "Europe/Berlin", catchUp: "all" });
    await create("berlin-october-twice", "30 2 * * *", { timeZone: "Europe/Berlin", catchUp: "all" });
    await days("2026-10-24T12:00:00Z", 3);
    expect(await slotsOf("berlin-october")).toEqual([
      "2026-10-23T23:30:00.000Z", // 01:30 CEST
      "2026-10-24T23:30:00.000Z", // 01:30 CEST, the night the clocks go back at 03:00
      "2026-10-26T00:30:00.000Z", // 01:30 CET
    ]);
    // 02:30 happens twice on 25 October: the job runs once, at the first (CEST) one
    expect(await slotsOf("berlin-october-twice")).toEqual([
      "2026-10-24T00:30:00.000Z",
      "2026-10-25T00:30:00.000Z",
      "2026-10-26T01:30:00.000Z",
    ]);
  });

  test("an hourly schedule runs every real hour through the October overlap", async () => {
    clock.set("2026-10-24T23:30:00Z");
    await create("berlin-hourly", "0 * * * *", { timeZone: "Europe/Berlin", catchUp: "all" });
    clock.set("2026-10-25T03:30:00Z");
    await tick();
    expect(await slotsOf("berlin-hourly")).toEqual([
      "2026-10-25T00:00:00.000Z", // 02:00 CEST
      "2026-10-25T01:00:00.000Z", // 02:00 CET, the same wall-clock hour again
      "2026-10-25T02:00:00.000Z",
      "2026-10-25T03:00:00.000Z",
    ]);
  });
});

test("schedules defined in code are seeded once; runtime edits win", async () => {
  clock.set("2030-03-01T00:00:00Z");
  const nightly = defineSchedule("code-nightly", { cron: "0 3 * * *", kind: "system.noop" });
  expect(await seedSchedules(deps, ctx, { schedules: [nightly] })).toBe(1);
  await putSchedule(deps, ctx, { name: "code-nightly", cron: "0 4 * * *", kind: "system.noop" });
  expect(await seedSchedules(deps, ctx, { schedules: [nightly] })).toBe(0);
  const view = (await listSchedules(deps, ctx)).find((s) => s.name === "code-nightly");
  expect(view?.cron).toBe("0 4 * * *");
  expect(view?.nextRuns).toEqual([
    "2030-03-01T04:00:00.000Z",
    "2030-03-02T04:00:00.000Z",
    "2030-03-03T04:00:00.000Z",
  ]);
  expect(() => defineSchedule("bad", { cron: "61 * * * *", kind: "system.noop" })).toThrow();
});

test("a disabled schedule enqueues nothing; enabled again, it starts from now", async () => {
  clock.set("2030-04-01T00:00:00.100Z");
  await putSchedule(deps, ctx, {
    name: "paused",
    cron: "* * * * *",
    kind: "system.noop",
    catchUp: "all",
    enabled: false,
  });
  clock.set("2030-04-01T00:05:30Z");
  await tick();
  expect(await slotsOf("paused")).toEqual([]);
  await putSchedule(deps, ctx, { name: "paused", cron: "* * * * *", kind: "system.noop", catchUp: "all" });
  clock.set("2030-04-01T00:06:00Z");
  await tick();
  expect(await slotsOf("paused")).toEqual(["2030-04-01T00:06:00.000Z"]);
});
