import { afterAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { epochMs } from "../../src/clock.ts";
import { execute, openDatabase } from "../../src/db/client.ts";
import { databaseClock } from "../../src/db/database-clock.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { createJobLoop, type JobLoop } from "../../src/jobs/job-loop.ts";
import { LEASE_MS } from "../../src/jobs/queue.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";

const loops: JobLoop[] = [];
const redactor = createRedactor([]);
afterAll(async () => {
  await Promise.allSettled(loops.map((l) => l.stop(1_000)));
});
const t = useTestDatabase({ poolSize: 6 });

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ level: "debug", redactor, write: (l) => lines.push(JSON.parse(l)) });
  return { logger, lines };
}

const databaseNow = async () => {
  const [row] = await execute<{ ms: string }>(
    t.database.db,
    sql`select (extract(epoch from clock_timestamp()) * 1000)::text as ms`,
  );
  return Number(row?.ms);
};

/** A host whose clock runs this far ahead of the database's (and the real time). */
const AHEAD_MS = LEASE_MS + 60_000;

test("a host clock minutes ahead reads the database's time, and says so once", async () => {
  const { logger, lines } = capture();
  const clock = await databaseClock(t.database.db, logger, { hostNow: () => Date.now() + AHEAD_MS });
  try {
    expect(Math.abs(clock.now().getTime() - (await databaseNow()))).toBeLessThan(500);
    // the hot paths read it without a Date (epochMs): the same time
    expect(Math.abs(epochMs(clock) - clock.now().getTime())).toBeLessThan(50);
    expect(Math.abs(clock.offsetMs + AHEAD_MS)).toBeLessThan(500);
    await clock.refresh();
    const warnings = lines.filter((l) => l.level === "warn");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toContain("clock differs from the database's");
  } finally {
    clock.stop();
  }
  // a host in step: no offset worth the name, no warning
  const inStep = capture();
  const honest = await databaseClock(t.database.db, inStep.logger);
  honest.stop();
  expect(Math.abs(honest.offsetMs)).toBeLessThan(500);
  expect(inStep.lines.filter((l) => l.level === "warn")).toHaveLength(0);
});

test("a job under lease is not taken over by a host whose clock runs ahead", async () => {
  let release: () => void = () => {};
  const runs: string[] = [];
  const job = (worker: string) =>
    defineJob("clock.lease", z.object({}), async () => {
      runs.push(worker);
      if (worker === "a") await new Promise<void>((r) => (release = r));
    });
  const { logger } = capture();
  const realTime = { now: () => new Date() };
  const start = (worker: string, clock: { now(): Date }) => {
    const claims: number[] = [];
    const loop = createJobLoop(
      { database: t.database, clock, logger, redactor },
      {
        registry: createJobRegistry([job(worker)]),
        parallelism: 1,
        batchSize: 1,
        pollMs: 60_000,
        workerId: worker,
        onEvent: (e) => e.type === "claimed" && claims.push(e.count),
      },
    );
    loops.push(loop);
    return { loop, claims };
  };
  const { id } = await enqueue(t.database.db, { clock: realTime }, job("a"), {});
  const a = start("a", realTime);
  await a.loop.start();
  await waitFor(() => runs.length === 1, { what: "a to start the job" });

  // b's host runs ahead by more than the lease; timed by the database's clock it sees the lease hold
  const skewed = await databaseClock(t.database.db, logger, { hostNow: () => Date.now() + AHEAD_MS });
  const b = start("b", skewed);
  await b.loop.start();
  await waitFor(() => b.claims.length >= 1, { what: "b's first claim" });
  expect(b.claims).toEqual([0]);
  expect((await jobRow(t.database, id)).locked_by).toBe("a");
  skewed.stop();

  // the hazard this prevents: the same host timing the lease by its own clock takes the job over
  const c = start("c", { now: () => new Date(Date.now() + AHEAD_MS) });
  await c.loop.start();
  await waitFor(() => runs.includes("c"), { what: "c to take the job over" });
  release();
});

test("a database it cannot read leaves the host's clock in charge, with a warning", async () => {
  const closed = await openDatabase(t.url, { poolSize: 1 });
  await closed.close();
  const { logger, lines } = capture();
  const clock = await databaseClock(closed.db, logger);
  clock.stop();
  expect(clock.offsetMs).toBe(0);
  expect(Math.abs(clock.now().getTime() - Date.now())).toBeLessThan(50);
  expect(lines.some((l) => l.level === "warn" && String(l.msg).includes("could not read"))).toBe(true);
});
