// bench:jobs `--only flow,rate` (issue #35): a 10,000-job fan-out/fan-in flow beside a plain drain
// of as many jobs, and a rate-limited drain measured against its configured rate. Each run in a
// fresh database (`database()`), one job loop at the production defaults (4 slots, batches of 5,
// a 2 s poll, LISTEN on).
import { z } from "zod";
import { systemClock } from "../src/clock.ts";
import { systemCtx } from "../src/context.ts";
import { type Database, openDatabase } from "../src/db/client.ts";
import { enqueueMany } from "../src/jobs/enqueue.ts";
import { enqueueFlow } from "../src/jobs/enqueue-flow.ts";
import { createJobLoop, type JobLoop } from "../src/jobs/job-loop.ts";
import { createJobRegistry, defineJob, jobKind } from "../src/jobs/registry.ts";
import { createRedactor } from "../src/redact.ts";
import { createLogger } from "../src/telemetry/logger.ts";

const redactor = createRedactor([]);
const logger = createLogger({ level: "error", redactor, write: (l) => process.stderr.write(`${l}\n`) });

function loopOf(database: Database, definitions: Parameters<typeof createJobRegistry>[0]): JobLoop {
  return createJobLoop(
    { database, clock: systemClock, logger, redactor },
    { registry: createJobRegistry(definitions), parallelism: 4, batchSize: 5, pollMs: 2_000 },
  );
}

/** Waits until `count()` reaches `n`; resolves the seconds since `start`. */
function until(count: () => number, n: number, start: number): Promise<number> {
  return new Promise((resolve) => {
    const check = () => (count() >= n ? resolve((performance.now() - start) / 1000) : setTimeout(check, 1));
    check();
  });
}

/**
 * One root, `width - 2` children of it, one sink depending on all of them: `width` jobs. Returns
 * jobs/s from `enqueueFlow` to the sink's end, and jobs/s of a plain drain of `width` jobs.
 */
export async function flowRun(
  database: () => Promise<string>,
  width: number,
): Promise<{ flow: number; plain: number }> {
  let ran = 0;
  const step = defineJob("bench.flow", z.object({ n: z.number() }), () => {
    ran++;
  });
  const deps = async () => {
    const db = await openDatabase(await database(), { poolSize: 10 });
    return {
      db,
      deps: {
        database: db,
        clock: systemClock,
        logger,
        config: { settings: { BackgroundProcessing: { JobMaxAttempts: 10 } } },
      },
    };
  };
  // the flow
  const f = await deps();
  const loop = loopOf(f.db, [step]);
  await loop.start();
  const middle = Array.from({ length: width - 2 }, (_, n) => `m${n}`);
  const start = performance.now();
  await enqueueFlow(f.deps, systemCtx("bench"), {
    jobs: [
      { key: "root", kind: step, payload: { n: -1 } },
      ...middle.map((key, n) => ({ key, kind: step, payload: { n }, dependsOn: ["root"] })),
      { key: "sink", kind: step, payload: { n: -2 }, dependsOn: middle },
    ],
  });
  const flowSeconds = await until(() => ran, width, start);
  await loop.stop(5_000);
  await f.db.close();
  // the plain drain of as many jobs, same loop settings
  ran = 0;
  const p = await deps();
  const plainLoop = loopOf(p.db, [step]);
  await enqueueMany(
    p.db.db,
    { clock: systemClock },
    Array.from({ length: width }, (_, n) => ({ job: step, payload: { n } })),
  );
  const plainStart = performance.now();
  await plainLoop.start();
  const plainSeconds = await until(() => ran, width, plainStart);
  await plainLoop.stop(5_000);
  await p.db.close();
  return { flow: width / flowSeconds, plain: width / plainSeconds };
}

/**
 * `jobs` jobs of one key limited to `limit` per second, drained by `loops` loops: the rate of
 * starts after the first burst (`limit` at once), as measured over the starts' times.
 */
export async function rateRun(
  database: () => Promise<string>,
  input: { jobs: number; limit: number; loops: number },
): Promise<{ rate: number; seconds: number }> {
  const starts: number[] = [];
  const kind = jobKind("bench.rate", z.object({ n: z.number() }), {
    rateLimit: { key: () => "api", limit: input.limit, periodSeconds: 1 },
  });
  const definition = { ...kind, handler: () => void starts.push(performance.now()) };
  const url = await database();
  const dbs = await Promise.all(
    Array.from({ length: input.loops }, () => openDatabase(url, { poolSize: 3 })),
  );
  const loops = dbs.map((db) => loopOf(db, [definition]));
  await Promise.all(loops.map((l) => l.start()));
  const [first] = dbs;
  if (!first) throw new Error("no loop");
  const start = performance.now();
  await enqueueMany(
    first.db,
    { clock: systemClock },
    Array.from({ length: input.jobs }, (_, n) => ({ job: kind, payload: { n } })),
  );
  const seconds = await until(() => starts.length, input.jobs, start);
  await Promise.all(loops.map((l) => l.stop(5_000)));
  await Promise.all(dbs.map((db) => db.close()));
  starts.sort((a, b) => a - b);
  // the first `limit` start at once (the burst), then one every 1 / limit s: the last start is
  // (jobs − limit) / limit s after the first. (Timing from the burst's last start would understate
  // the span by the time its handlers queue for the 4 slots.)
  const span = ((starts.at(-1) ?? 0) - (starts[0] ?? 0)) / 1000;
  return { rate: (input.jobs - input.limit) / span, seconds };
}
