import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { records, startApi } from "../helpers/api-process.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { appRoleEnv, createTestDatabase } from "../helpers/database.ts";
import { runEntry } from "../helpers/process.ts";
import { validProductionEnv } from "../helpers/production-env.ts";

/** Issue #15, points 2, 9 and 10, with the real processes: failures an operator can read. */
const t = useTestDatabase();

const stackLine = /^\s+at /m;

test("a migration statement PostgreSQL refuses: its message, code and migration, not drizzle's `Failed query`", async () => {
  const empty = await createTestDatabase({ empty: true });
  try {
    // a table in the way of the baseline: CREATE TABLE fails with 42P07
    await execute(empty.database.db, sql`create table tenants (id int)`);
    const run = await runEntry("src/migrate.ts", [], {
      PLINTH_ENVIRONMENT: "Development",
      DATABASE_URL: empty.url,
    });
    expect(run.exitCode).toBe(1);
    const failed = records(run.stdout.split("\n")).find((r) => r.msg === "migration failed");
    expect(failed).toMatchObject({
      level: "error",
      migration: "0000_baseline",
      code: "42P07",
      message: 'relation "tenants" already exists',
    });
    expect(String(failed?.statement)).toStartWith("CREATE TABLE");
    expect(run.stdout).not.toContain("Failed query");
  } finally {
    await empty.drop();
  }
});

test("a port already in use: one JSON log line and exit 1, no stack trace", async () => {
  const holder = Bun.serve({ port: 0, fetch: () => new Response("taken") });
  try {
    const api = startApi({
      PLINTH_ENVIRONMENT: "Development",
      DATABASE_URL: t.url,
      PORT: String(holder.port),
    });
    expect(await api.proc.exited).toBe(1);
    const line = await api.waitForLine((l) => l.includes("port already in use"));
    expect(JSON.parse(line)).toMatchObject({ level: "error", port: holder.port, code: "EADDRINUSE" });
    expect(api.stderr()).not.toMatch(stackLine);
    expect(api.stderr()).toBe("");
    for (const l of api.lines) expect(() => JSON.parse(l)).not.toThrow();
  } finally {
    holder.stop(true);
  }
});

test("a deliberate 503 (Production, cache down, failing closed) is a warning without a stack", async () => {
  const api = startApi(
    validProductionEnv({
      ...appRoleEnv(t.url),
      CACHE_URL: "redis://:cache-password-456@127.0.0.1:1",
      Logging__Level: "info",
    }),
  );
  try {
    const port = await api.listening(30_000);
    const response = await fetch(`http://127.0.0.1:${port}/api/auth/login`, {
      method: "POST",
      headers: { host: "api.example.com", "content-type": "application/json" },
      body: JSON.stringify({ email: "someone@example.com", password: "a-long-test-password-1" }),
    });
    expect(response.status).toBe(503);
    const refused = await api.waitForLine((l) => l.includes("request refused"));
    expect(JSON.parse(refused)).toMatchObject({ level: "warn", path: "/api/auth/login" });
    const all = records(api.lines);
    expect(all.some((r) => r.msg === "unhandled error")).toBe(false);
    expect(JSON.stringify(all)).not.toContain('"stack"');
  } finally {
    await api.stop();
  }
}, 40_000);

describe("one process per embedded database", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "plinth-pglite-")), "dev");
  const env = { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: `pglite:${dir}` };

  test("a second process on the same PGlite directory fails at once, naming it and the holder", async () => {
    const first = startApi(env);
    try {
      await first.listening(30_000);
      const second = startApi(env);
      expect(await second.proc.exited).toBe(1);
      expect(second.lines.some((l) => l.includes('"msg":"listening"'))).toBe(false);
      expect(second.stderr()).toContain(`embedded database ${dir} is in use by process ${first.proc.pid}`);
      const migrator = await runEntry("src/migrate.ts", [], env);
      expect(migrator.exitCode).toBe(1);
      expect(migrator.stdout).toContain(`is in use by process ${first.proc.pid}`);
    } finally {
      expect(await first.stop()).toBe(0);
    }
    // released on shutdown: the migrator opens it now
    expect((await runEntry("src/migrate.ts", [], env)).exitCode).toBe(0);
  }, 60_000);

  test("a lock left by a process that is gone is taken over", async () => {
    writeFileSync(`${dir}.lock`, "999999999\n");
    const run = await runEntry("src/migrate.ts", [], env);
    expect(run.exitCode).toBe(0);
  }, 30_000);
});
