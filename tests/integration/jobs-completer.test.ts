import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { type Database, openDatabase } from "../../src/db/client.ts";
import { createOutageLog } from "../../src/db/outage-log.ts";
import { claimJobs } from "../../src/jobs/claim.ts";
import { createCompleter } from "../../src/jobs/completer.ts";
import { enqueue, enqueueMany } from "../../src/jobs/enqueue.ts";
import { createJobLoop } from "../../src/jobs/job-loop.ts";
import { completeJobs } from "../../src/jobs/outcomes.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger } from "../../src/telemetry/logger.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";
import { TcpProxy } from "../helpers/tcp-proxy.ts";

// The completer and the loop when the database goes away: each case reaches PostgreSQL through a
// proxy the test cuts (every connection reset, new ones refused) and restores.

const t = useTestDatabase();
const clock = new ManualClock();
const redactor = createRedactor([]);
let proxy: TcpProxy;
let viaProxy: Database;

beforeAll(async () => {
  const target = new URL(t.directUrl);
  proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  const url = new URL(t.directUrl);
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  viaProxy = await openDatabase(url.toString(), { poolSize: 2, connectTimeoutSeconds: 2 });
});
afterAll(async () => {
  await viaProxy.close(1);
  await proxy.close();
});

function logs() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ level: "debug", redactor, write: (l) => lines.push(JSON.parse(l)) });
  const seen = (msg: string) => lines.some((l) => l.msg === msg);
  return { lines, logger, seen };
}

let n = 0;
async function claimOne(workerId: string) {
  const job = defineJob(`test.completer-${++n}`, z.object({}), () => {});
  const { id } = await enqueue(t.database.db, { clock }, job, {});
  const [claimed] = await claimJobs(t.database.db, {
    workerId,
    kinds: [job.kind],
    limit: 1,
    now: clock.now(),
  });
  if (claimed?.id !== id) throw new Error("not claimed");
  return claimed;
}

describe("the completer across a cut connection", () => {
  test("an outcome whose write failed is kept and written once the database answers", async () => {
    const { logger, seen } = logs();
    const job = await claimOne("w-retry");
    const completer = createCompleter(
      { db: viaProxy.db, clock, logger },
      { workerId: "w-retry", retryMs: 50, outage: createOutageLog({ logger, what: "outcome write" }) },
    );
    proxy.down();
    const recorded = completer.record({ type: "succeeded", job, startedAt: performance.now() });
    await waitFor(() => seen("outcome write failed"), { what: "the failed write" });
    expect((await jobRow(t.database, job.id)).status).toBe("processing");
    proxy.up();
    expect(await recorded).toBe("succeeded");
    expect(await jobRow(t.database, job.id)).toMatchObject({ status: "succeeded", attempts: 1 });
    expect(seen("outcome write recovered")).toBe(true);
    completer.close();
  });

  test("a write whose answer was lost counts as recorded when it had committed, not as taken over", async () => {
    const { logger, seen } = logs();
    const job = await claimOne("w-verify");
    const completer = createCompleter(
      { db: viaProxy.db, clock, logger },
      { workerId: "w-verify", retryMs: 50, outage: createOutageLog({ logger, what: "outcome write" }) },
    );
    proxy.down();
    const recorded = completer.record({ type: "succeeded", job, startedAt: performance.now() });
    await waitFor(() => seen("outcome write failed"), { what: "the failed write" });
    // as if the failed write had committed before its connection went: the row is written already
    expect(
      await completeJobs(t.database.db, { workerId: "w-verify", jobs: [job], now: clock.now() }),
    ).toEqual([job.id]);
    proxy.up();
    expect(await recorded).toBe("succeeded");
    expect(seen("job lease was taken over; result not recorded")).toBe(false);
    completer.close();
  });
});

describe("the job loop across a cut connection", () => {
  test("jobs claimed by a statement whose answer was lost are run at once, not after their lease", async () => {
    const { logger, seen } = logs();
    const ran: number[] = [];
    const job = defineJob("test.completer-adopt", z.object({}), (_p, c) => void ran.push(c.id));
    const loop = createJobLoop(
      { database: viaProxy, clock, logger, redactor },
      {
        registry: createJobRegistry([job]),
        parallelism: 4,
        batchSize: 5,
        pollMs: 60_000,
        listen: false,
        workerId: "w-adopt",
      },
    );
    await loop.start();
    await waitFor(() => loop.mode === "waiting", { what: "the first, empty claim" });
    proxy.down();
    loop.wake();
    await waitFor(() => seen("job loop statement failed"), { what: "the failed claim" });
    // what a claim that committed but whose answer never came leaves: jobs processing under this
    // worker that its loop does not know of
    const ids = await enqueueMany(t.database.db, { clock }, [
      { job, payload: {} },
      { job, payload: {} },
      { job, payload: {} },
    ]);
    expect(
      (await claimJobs(t.database.db, { workerId: "w-adopt", kinds: [job.kind], limit: 3, now: clock.now() }))
        .map((j) => j.id)
        .sort(),
    ).toEqual([...ids].sort());
    proxy.up();
    await waitFor(() => ran.length === 3, { timeoutMs: 10_000, what: "the orphaned jobs to run" });
    expect(ran.sort()).toEqual([...ids].sort());
    expect(seen("jobs claimed by a statement whose answer was lost: running them now")).toBe(true);
    await waitFor(
      async () =>
        (await Promise.all(ids.map((id) => jobRow(t.database, id)))).every((r) => r.status === "succeeded"),
      { what: "their outcomes recorded" },
    );
    for (const id of ids) expect((await jobRow(t.database, id)).attempts).toBe(1);
    await loop.stop(1_000);
  });
});
