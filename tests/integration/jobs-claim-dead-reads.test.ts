// Jobs enqueued together share the fair index's key (priority, group, run_after). With the index's
// deduplication they would sit in one posting list per group, which PostgreSQL can mark dead only
// once every job in it is claimed: until then each probe of the claim's walk over groups re-reads
// the heap tuples of every job already claimed from the group it lands on. The index has
// deduplication off (migration 0017); this proves a probe's reads stay flat.
//
// A scan marks an entry dead only when its job's old version is dead to every snapshot. The quick
// test PostgreSQL makes first compares the deleting transaction with the oldest transaction running
// in any database of the server (the snapshot's xmin), not only in this one: while one transaction
// anywhere on the server (another test file's, another process's) began before the last claim and
// is still open, no scan can mark the claimed jobs' entries, whatever the index. So the probes wait
// for every transaction older than the claims to end (a condition, not a fixed time); measured:
// one open `begin; select pg_current_xact_id()` in the postgres database made the second probe read
// 35 blocks without this wait.
import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { execute } from "../../src/db/client.ts";
import { completeAndClaimJobs } from "../../src/jobs/claim.ts";
import { enqueueMany } from "../../src/jobs/enqueue.ts";
import type { JobLease } from "../../src/jobs/queue.ts";
import { defineJob } from "../../src/jobs/registry.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase();

test("after thousands of claims from bulk-enqueued groups, the walk's probe reads a few buffers", async () => {
  const job = defineJob("dead.reads", z.object({ n: z.number() }), () => {});
  const clock = new ManualClock();
  // one statement: every job gets the same run_after; 100 groups, their rows interleaved in the heap
  await enqueueMany(
    t.database.db,
    { clock },
    Array.from({ length: 5_000 }, (_, n) => ({ job, payload: { n }, options: { tenantId: `t-${n % 100}` } })),
  );
  await execute(t.database.db, sql`analyze background_jobs`);
  const input = { workerId: "w", kinds: [job.kind], limit: 16, now: clock.now() };
  let cursor = "";
  let done: JobLease[] = [];
  for (let i = 0; i < 200; i++) {
    const r = await completeAndClaimJobs(t.database.db, { ...input, complete: done, groupCursor: cursor });
    cursor = r.cursor;
    done = r.claimed.map((j) => ({ id: j.id, attempts: j.attempts }));
  }
  const [claimed] = await execute<{ n: number }>(
    t.database.db,
    sql`select count(*)::int as n from background_jobs where status <> 'pending'`,
  );
  expect(claimed?.n).toBe(3_200); // 32 of each group's 50
  // the walk's probe (src/jobs/claim.ts `groupAfter`): the first due job of the group after 't-1'
  const probe = async () => {
    const [row] = await execute<{
      "QUERY PLAN": [{ Plan: { "Shared Hit Blocks": number; "Shared Read Blocks": number } }];
    }>(
      t.database.db,
      sql`explain (analyze, buffers, format json)
          select coalesce(group_key, '') from background_jobs
          where status in ('pending', 'failed') and priority = 0 and run_after <= ${clock.now().toISOString()}::timestamptz
            and kind = ${job.kind} and coalesce(group_key, '') > 't-1'
          order by priority, coalesce(group_key, ''), run_after limit 1`,
    );
    const plan = row?.["QUERY PLAN"][0].Plan;
    return (plan?.["Shared Hit Blocks"] ?? 0) + (plan?.["Shared Read Blocks"] ?? 0);
  };
  // every claim is older than this transaction id; once the server's oldest running transaction is
  // newer, none of them is running for any snapshot taken from then on
  const [mark] = await execute<{ xid: string }>(t.database.db, sql`select pg_current_xact_id()::text as xid`);
  await waitFor(
    async () => {
      const [row] = await execute<{ past: boolean }>(
        t.database.db,
        sql`select pg_snapshot_xmin(pg_current_snapshot()) > ${mark?.xid}::xid8 as past`,
      );
      return row?.past;
    },
    { timeoutMs: 20_000, what: "every transaction on the server older than the claims to end" },
  );
  await probe(); // the first scan over the claimed jobs' entries marks them dead
  // with deduplication: one heap page per claimed job of group t-10 (32), every time
  expect(await probe()).toBeLessThan(12);
});
