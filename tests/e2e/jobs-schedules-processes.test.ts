import { afterAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { type ApiProcess, startApi } from "../helpers/api-process.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

/**
 * Three real API processes (`bun src/server.ts`), each running the schedules loop every second over
 * one database: a schedule firing every second gets exactly one job per slot (dedup key
 * `schedule:<name>:<slot>`), and no slot is missed.
 */

const t = useTestDatabase({ poolSize: 4 });
const apis: ApiProcess[] = [];
afterAll(async () => {
  await Promise.all(apis.map((api) => (api.proc.exitCode === null ? api.stop() : undefined)));
}, 60_000);

const NAME = "e2e-every-second";

async function slotJobs() {
  return execute<{ dedup_key: string; n: number }>(
    t.database.db,
    sql`select dedup_key, count(*)::int as n from background_jobs
        where dedup_key like ${`schedule:${NAME}:%`} group by dedup_key order by dedup_key`,
  );
}

test("three API processes enqueue one job per schedule slot, every slot", async () => {
  for (let i = 0; i < 3; i++)
    apis.push(
      startApi({
        PLINTH_ENVIRONMENT: "Development",
        DATABASE_URL: t.url,
        Database__PoolSize: "3",
      }),
    );
  await Promise.all(apis.map((api) => api.listening(30_000)));
  // every second, every missed slot caught up (a late tick must not drop one)
  await execute(
    t.database.db,
    sql`insert into job_schedules (name, cron, time_zone, kind, catch_up, last_slot)
        values (${NAME}, '* * * * * *', 'UTC', 'system.noop', 'all', date_trunc('second', clock_timestamp()))`,
  );
  await waitFor(async () => (await slotJobs()).length >= 10, {
    timeoutMs: 30_000,
    intervalMs: 200,
    what: "ten slots",
  });
  await execute(t.database.db, sql`update job_schedules set enabled = false where name = ${NAME}`);
  const codes = await Promise.all(apis.map((api) => api.stop()));
  expect(codes).toEqual([0, 0, 0]);

  const jobs = await slotJobs();
  expect(jobs.filter((j) => j.n !== 1)).toEqual([]); // no slot twice
  const slots = jobs
    .map((j) => Date.parse(j.dedup_key.slice(`schedule:${NAME}:`.length)))
    .sort((a, b) => a - b);
  expect(slots.every((s) => s % 1_000 === 0)).toBe(true);
  const gaps = slots.slice(1).map((s, i) => s - (slots[i] as number));
  expect(gaps.every((g) => g === 1_000)).toBe(true); // no slot missed
  const [ran] = await execute<{ n: number }>(
    t.database.db,
    sql`select count(*)::int as n from background_jobs
        where dedup_key like ${`schedule:${NAME}:%`} and status = 'succeeded'`,
  );
  expect(ran?.n).toBeGreaterThan(0);
}, 90_000);
