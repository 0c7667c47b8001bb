import { afterAll, beforeAll, expect, test } from "bun:test";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { type Database, openDatabase } from "../../src/db/client.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { createJobLoop } from "../../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { waitFor } from "../helpers/jobs.ts";

/** The job loop's modes as documented at the top of src/jobs/job-loop.ts. */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
}, 60_000);
afterAll(() => t.drop());

const clock = new ManualClock();
const redactor = createRedactor([]);
const loopOver = (database: Database, kind: string, ran: number[] = []) =>
  createJobLoop(
    { database, clock, logger: createLogger({ level: "error", redactor, write: () => {} }), redactor },
    {
      registry: createJobRegistry([defineJob(kind, z.object({}), (_p, c) => void ran.push(c.id))]),
      parallelism: 2,
      batchSize: 2,
      pollMs: 60_000,
      listen: false,
    },
  );

test("idle → claiming → waiting once a claim comes back short → claiming on wake → stopped", async () => {
  const ran: number[] = [];
  const loop = loopOver(t.database, "test.modes", ran);
  expect(loop.mode).toBe("idle");
  await loop.start();
  await waitFor(() => loop.mode === "waiting", { what: "the empty claim" });
  const job = defineJob("test.modes", z.object({}), () => {});
  const { id } = await enqueue(t.database.db, { clock }, job, {});
  loop.wake();
  expect(loop.mode).toBe("claiming");
  await waitFor(() => ran.includes(id), { what: "the job to run" });
  await waitFor(() => loop.mode === "waiting", { what: "the loop to wait again" });
  expect(await loop.stop(1_000)).toEqual({ finished: 0, released: [] });
  expect(loop.mode).toBe("stopped");
  await loop.start(); // stopped is final
  expect(loop.mode).toBe("stopped");
});

test("a failed statement puts the loop in backoff; stop still ends it", async () => {
  const database = await openDatabase(t.url, { poolSize: 1 });
  const loop = loopOver(database, "test.modes-backoff");
  await loop.start();
  await waitFor(() => loop.mode === "waiting", { what: "the first claim" });
  await database.close();
  loop.wake();
  await waitFor(() => loop.mode === "backoff", { what: "the failed statement" });
  await loop.stop(100);
  expect(loop.mode).toBe("stopped");
});
