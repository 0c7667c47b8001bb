import { expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { enqueue } from "../../src/jobs/enqueue.ts";
import { systemNoop } from "../../src/jobs/registry.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { jobRow, waitFor } from "../helpers/jobs.ts";
import { spawnBun } from "../helpers/processes.ts";

const t = useTestDatabase();

test("the API process runs the job loop (system.noop) and exits 0 on SIGTERM", async () => {
  const server = spawnBun(["src/server.ts"], { DATABASE_URL: t.url, PORT: "0", Database__PoolSize: "3" });
  try {
    await server.waitForLine((l) => l.includes('"msg":"background loops started"'));
    const listening = await server.waitForLine((l) => l.includes('"msg":"listening"'));
    expect(listening).toContain('"port"');
    const { id } = await enqueue(t.database.db, { clock: new ManualClock() }, systemNoop, {});
    await waitFor(async () => (await jobRow(t.database, id)).status === "succeeded", { what: "noop job" });
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
    expect(server.lines.some((l) => l.includes('"msg":"job loop stopped"'))).toBe(true);
  } finally {
    if (server.proc.exitCode === null) server.proc.kill("SIGKILL");
  }
}, 30_000);

test("with BackgroundProcessing:Enabled=false the API process runs no loop", async () => {
  const server = spawnBun(["src/server.ts"], {
    DATABASE_URL: t.url,
    PORT: "0",
    Database__PoolSize: "3",
    BackgroundProcessing__Enabled: "false",
  });
  try {
    const line = await server.waitForLine((l) => l.includes('"msg":"background loops started"'));
    expect(JSON.parse(line)).toMatchObject({ running: [] });
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
  } finally {
    if (server.proc.exitCode === null) server.proc.kill("SIGKILL");
  }
}, 30_000);
