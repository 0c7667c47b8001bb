// The job loop's cycle statement (record a batch of results, claim the next batch) of two trees,
// alternated in blocks on one connection of one database: a same-run A/B of the statement's cost
// that other load on the machine moves for both alike (docs/performance.md, "Lock order").
//   bun bench/jobs-cycle-ab.ts <other tree's root> [blocks=20] [per block=100] [results=5]
// Two shapes: a plain drain's batch (`results` successes, no dependents) and a flow's (`results`
// parents of one waiting child each, recorded with the fan-in); each claims 5 due jobs. Blocks
// alternate ABBA; the ratio is this tree's time over the other's, the median over block pairs.
import { resolve } from "node:path";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { z } from "zod";
import { systemClock } from "../src/clock.ts";
import { execute, executePrepared, openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrator.ts";
import { completeAndClaimStatement as here } from "../src/jobs/claim.ts";
import { enqueueMany } from "../src/jobs/enqueue.ts";
import { jobKind } from "../src/jobs/registry.ts";

const other = resolve(process.argv[2] ?? ".");
const BLOCKS = Number(process.argv[3] ?? 20);
const PER_BLOCK = Number(process.argv[4] ?? 100);
const RESULTS = Number(process.argv[5] ?? 5);
const { completeAndClaimStatement: there } = (await import(`${other}/src/jobs/claim.ts`)) as {
  completeAndClaimStatement: typeof here;
};
const name = `cycleab_${process.pid}`;
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe(`create database "${name}"`);
const database = await openDatabase(`postgres://postgres@127.0.0.1:5432/${name}`, { poolSize: 1 });
try {
  await migrate(database.db);
  const step = jobKind("bench.cycle", z.object({ n: z.number() }));
  const kind = step.kind;
  const now = systemClock.now();
  const ids = await enqueueMany(
    database.db,
    { clock: systemClock },
    Array.from({ length: 20 }, (_, n) => ({ job: step, payload: { n } })),
  );
  const held = ids.slice(0, 5);
  const children = ids.slice(10, 15);
  await execute(
    database.db,
    sql`insert into job_dependencies (parent_id, child_id)
        select p, c from unnest(${`{${held.join(",")}}`}::bigint[], ${`{${children.join(",")}}`}::bigint[]) as e(p, c)`,
  );
  await execute(database.db, sql`analyze background_jobs`);
  // before each statement (not timed): 5 held by w, their children waiting, 5 due
  const reset = (dependents: boolean) =>
    execute(
      database.db,
      sql`with j as (
            update background_jobs set
              status = case when id = any(${`{${held.join(",")}}`}::bigint[]) then 'processing'
                            when id = any(${`{${children.join(",")}}`}::bigint[]) then 'waiting'
                            when id <= ${ids[9] as number} then 'pending' else 'succeeded' end,
              locked_by = case when id = any(${`{${held.join(",")}}`}::bigint[]) then 'w' end,
              attempts = case when id = any(${`{${held.join(",")}}`}::bigint[]) then 1 else 0 end,
              has_dependents = ${dependents} and id = any(${`{${held.join(",")}}`}::bigint[]),
              waiting_on = case when id = any(${`{${children.join(",")}}`}::bigint[]) then 1 else 0 end,
              locked_until = null, run_after = ${now.toISOString()}::timestamptz
            where id = any(${`{${ids.join(",")}}`}::bigint[]) returning 1)
          update job_dependencies set resolved = false where (select count(*) from j) >= 0`,
    );
  const statement = (build: typeof here, dependents: boolean) =>
    build({
      workerId: "w",
      kinds: [kind],
      limit: 5,
      now,
      complete: held
        .slice(0, RESULTS)
        .map((id) => (dependents ? { id, attempts: 1, hasDependents: true } : { id, attempts: 1 })),
    });
  for (const dependents of [false, true]) {
    // each tree's statement does the work: RESULTS recorded, 5 claimed, their children counted down
    for (const build of [here, there]) {
      await reset(dependents);
      const rows = await executePrepared<{ part: string }>(database.db, statement(build, dependents));
      const [due] = await execute<{ n: number }>(
        database.db,
        sql`select count(*)::int as n from background_jobs where status = 'pending' and id = any(${`{${children.join(",")}}`}::bigint[])`,
      );
      const parts = rows.map((r) => r.part).join(",");
      if (
        rows.filter((r) => r.part === "done").length !== RESULTS ||
        rows.filter((r) => r.part === "claimed").length !== 5
      )
        throw new Error(`unexpected cycle: ${parts}`);
      if ((due?.n ?? 0) !== (dependents ? RESULTS : 0)) throw new Error(`children due: ${due?.n}`);
    }
    const times = { here: [] as number[], there: [] as number[] };
    for (let b = 0; b < BLOCKS * 2; b++) {
      const which = b % 4 === 0 || b % 4 === 3 ? "here" : "there";
      const query = statement(which === "here" ? here : there, dependents);
      let total = 0;
      for (let i = 0; i < PER_BLOCK; i++) {
        await reset(dependents);
        const start = performance.now();
        await executePrepared(database.db, query);
        total += performance.now() - start;
      }
      times[which].push((total / PER_BLOCK) * 1000);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const ratios = times.here.map((h, i) => h / (times.there[i] as number));
    console.log(
      JSON.stringify({
        shape: dependents ? "flow parents (fan-in)" : "plain drain",
        hereMedianUs: Math.round(median(times.here)),
        thereMedianUs: Math.round(median(times.there)),
        medianRatio: Number(median(ratios).toFixed(3)),
        blocksSlower: ratios.filter((r) => r > 1).length,
        blocks: ratios.length,
      }),
    );
  }
} finally {
  await database.close();
  await admin.unsafe(`drop database "${name}" with (force)`);
  await admin.end();
}
