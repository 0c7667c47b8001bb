import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { migrate, migrationStatus, readMigrations } from "../../src/db/migrator.ts";
import type { JobEvent } from "../../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { startBackground } from "../../src/loops/background.ts";
import { testConfig, testDeps, useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";
import { runEntry } from "../helpers/process.ts";

/**
 * The switch-over from the message-broker version (docs/runbooks/switch-over.md), rehearsed on a
 * real database: broker era → migrate → the new job loop takes over the old worker's leases only
 * once they expire → rollback with `migrate --down` → forward again.
 */
const t = useTestDatabase({ empty: true });

const LEASE_MS = 5 * 60 * 1000;

async function tableExists(name: string): Promise<boolean> {
  const [row] = await execute<{ found: string | null }>(
    t.database.db,
    sql`select to_regclass(${name})::text as found`,
  );
  return row?.found != null;
}

test("switch-over and rollback", async () => {
  const db = t.database.db;
  const clock = new ManualClock("2026-11-22T01:00:00Z");

  // 1. the broker-era database: inbox/outbox with messages, jobs the old worker holds
  expect(await migrate(db, { to: "0000_baseline" })).toEqual(["0000_baseline"]);
  expect(await tableExists("inbox_messages")).toBe(true);
  await execute(
    db,
    sql`insert into inbox_messages (id, message_type, payload) values (gen_random_uuid(), 'tenant.created', '{}'::jsonb)`,
  );
  await execute(
    db,
    sql`insert into outbox_messages (id, message_type, payload) values (gen_random_uuid(), 'job.requested', '{}'::jsonb)`,
  );
  const leasedUntil = new Date(clock.now().getTime() + LEASE_MS);
  const leased = await execute<{ id: number }>(
    db,
    sql`insert into background_jobs (kind, payload, status, attempts, locked_by, locked_until, run_after)
        select 'legacy.report', jsonb_build_object('n', n), 'processing', 1, 'old-worker',
               ${leasedUntil.toISOString()}::timestamptz, ${clock.now().toISOString()}::timestamptz
        from generate_series(1, 3) as n
        returning id::int as id`,
  );
  const ids = leased.map((r) => r.id).sort();

  // 2. the migrator (the old API and worker are stopped; their leases stay as they were)
  const applied = await migrate(db);
  expect(applied).toEqual(
    readMigrations()
      .slice(1)
      .map((m) => m.tag),
  );
  expect(await tableExists("inbox_messages")).toBe(false);
  expect(await tableExists("outbox_messages")).toBe(false);
  const untouched = await execute<{ status: string; locked_by: string }>(
    db,
    sql`select status, locked_by from background_jobs order by id`,
  );
  expect(untouched.every((r) => r.status === "processing" && r.locked_by === "old-worker")).toBe(true);

  // 3. the new API's job loop: nothing before the lease ends, everything after
  const runs: number[] = [];
  const legacy = defineJob("legacy.report", z.object({ n: z.number() }), (_p, c) => {
    runs.push(c.id);
  });
  const events: JobEvent[] = [];
  const deps = await testDeps(testConfig(), { database: t.database, clock });
  const background = await startBackground(deps, {
    registry: createJobRegistry([legacy]),
    jobLoop: { onEvent: (e) => events.push(e), listen: false, pollMs: 60_000 },
  });
  try {
    const loop = background.jobLoop;
    if (!loop) throw new Error("the job loop is off");
    const claims = () => events.filter((e) => e.type === "claimed").length;

    clock.advance(LEASE_MS - 1_000); // a second before the old lease ends
    const before = claims();
    loop.wake();
    await waitFor(() => claims() > before, { what: "a claim round" });
    expect(runs).toEqual([]);
    const held = await execute<{ locked_by: string }>(db, sql`select locked_by from background_jobs`);
    expect(held.every((r) => r.locked_by === "old-worker")).toBe(true);

    clock.advance(2_000); // the lease has expired
    loop.wake();
    await waitFor(() => runs.length === 3, { what: "the taken-over jobs to run" });
    expect([...runs].sort()).toEqual(ids);
    await waitFor(
      async () => {
        const rows = await execute<{ status: string }>(db, sql`select status from background_jobs`);
        return rows.every((r) => r.status === "succeeded");
      },
      { what: "the runs to be recorded" },
    );
    const done = await execute<{ attempts: number; locked_by: string | null }>(
      db,
      sql`select attempts, locked_by from background_jobs order by id`,
    );
    // the old worker's attempt counts: this was the second
    expect(done.every((r) => r.attempts === 2)).toBe(true);
  } finally {
    await background.stop(1_000);
  }

  // 4. rollback: `bun run migrate --down` steps back the newest migration with a Down step, then
  // the others down to the broker's: inbox/outbox recreated, empty
  const withDown = readMigrations()
    .filter((m) => m.down)
    .map((m) => m.tag);
  for (const tag of [...withDown].reverse()) {
    const down = await runEntry("src/migrate.ts", ["--down"], {
      DATABASE_URL: t.url,
      PLINTH_ENVIRONMENT: "Development",
    });
    expect(down.exitCode).toBe(0);
    expect(down.stdout).toContain(tag);
  }
  expect(await tableExists("inbox_messages")).toBe(true);
  expect(await tableExists("outbox_messages")).toBe(true);
  const [counts] = await execute<{ inbox: number; outbox: number }>(
    db,
    sql`select (select count(*)::int from inbox_messages) as inbox, (select count(*)::int from outbox_messages) as outbox`,
  );
  expect(counts).toEqual({ inbox: 0, outbox: 0 }); // historical messages are not restored
  const status = await migrationStatus(db);
  expect(status.find((m) => m.tag === "0001_remove_message_broker")?.applied).toBe(false);
  // the background_jobs rows survive a rollback
  const [jobs] = await execute<{ n: number }>(db, sql`select count(*)::int as n from background_jobs`);
  expect(jobs?.n).toBe(3);

  // 5. forward again
  expect(await migrate(db)).toEqual(withDown);
  expect(await tableExists("inbox_messages")).toBe(false);
  expect((await migrationStatus(db)).every((m) => m.applied && !m.changed)).toBe(true);
}, 60_000);
