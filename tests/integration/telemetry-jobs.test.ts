import { expect, test } from "bun:test";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { ManualClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { execute } from "../../src/db/client.ts";
import { createDeps } from "../../src/deps.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { createJobRegistry, defineJob } from "../../src/jobs/registry.ts";
import { startBackground } from "../../src/loops/background.ts";
import { createTelemetry } from "../../src/telemetry/sdk.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { appDatabaseOf } from "../helpers/database.ts";
import { waitFor } from "../helpers/jobs.ts";

const t = useTestDatabase();

test("each job run is a span with its statements inside, and one log line carrying the trace id", async () => {
  const exporter = new InMemorySpanExporter();
  const telemetry = createTelemetry({
    serviceName: "plinth",
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  const logs: string[] = [];
  const config = loadConfig({
    env: { DATABASE_URL: t.url },
    configDir: "/nonexistent",
    overrides: { "Logging:Level": "info", "BackgroundProcessing:JobPollSeconds": "1" },
  });
  const clock = new ManualClock();
  const deps = await createDeps(config, {
    database: appDatabaseOf(t.database),
    clock,
    telemetry,
    logWrite: (l) => logs.push(l),
  });
  const secretish = `param-${crypto.randomUUID()}`;
  const done: number[] = [];
  const ok = defineJob("test.telemetry-ok", z.object({}), async (_p, c) => {
    await execute(deps.database.db, sql`select ${c.id}::int as id`);
    done.push(c.id);
  });
  const failing = defineJob(
    "test.telemetry-fail",
    z.object({}),
    async () => {
      // a failed statement: its error message carries the parameter values
      await execute(deps.database.db, sql`select ${secretish}::int`);
    },
    { maxAttempts: 1 },
  );
  const background = await startBackground(deps, { registry: createJobRegistry([ok, failing]) });
  try {
    const { id } = await enqueue(t.database.db, { clock }, ok, {});
    const bad = await enqueue(t.database.db, { clock }, failing, {});
    background.jobLoop?.wake();
    await waitFor(() => done.includes(id), { what: "the job to run" });
    await waitFor(() => logs.some((l) => l.includes('"job is dead"') && l.includes(`"jobId":${bad.id}`)), {
      what: "the failing job to be dead",
    });

    const spans = exporter.getFinishedSpans();
    const jobSpan = spans.find((s) => s.name === "job test.telemetry-ok");
    expect(jobSpan).toBeDefined();
    expect(jobSpan?.attributes["plinth.job.id"]).toBe(id);
    expect(jobSpan?.parentSpanContext).toBeUndefined(); // a root: not a child of whatever claimed it
    const traceId = jobSpan?.spanContext().traceId;
    const inside = spans.filter(
      (s) =>
        s.spanContext().traceId === traceId && s.parentSpanContext?.spanId === jobSpan?.spanContext().spanId,
    );
    expect(inside.some((s) => s.attributes["db.query.text"] === "select $1::int as id")).toBe(true);

    const lines = logs.map((l) => JSON.parse(l));
    const run = lines.find((l) => l.msg === "job run" && l.jobId === id);
    expect(run).toMatchObject({ level: "info", kind: "test.telemetry-ok", outcome: "ok", traceId });
    expect(typeof run.durationMs).toBe("number");
    const failed = lines.find((l) => l.msg === "job run" && l.jobId === bad.id);
    expect(failed).toMatchObject({ level: "warn", outcome: "error" });
    expect(failed.error).toMatchObject({
      message: 'invalid input syntax for type integer: "?"',
      code: "22P02",
      statement: "select $1::int",
    });
    // the failed query's parameter value is in no log line, nor in last_error
    expect(logs.join("\n")).not.toContain(secretish);
    const [row] = await execute<{ last_error: string }>(
      t.database.db,
      sql`select last_error from background_jobs where id = ${bad.id}`,
    );
    expect(row?.last_error).not.toContain(secretish);
    expect(row?.last_error).toContain("select $1::int");
  } finally {
    await background.stop(1_000);
    await telemetry.shutdown();
  }
});
