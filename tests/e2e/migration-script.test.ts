import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { migrate, migrationStatus, readMigrations } from "../../src/db/migrator.ts";
import { stopChildrenAfterAll, tracked } from "../helpers/children.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";
import { runEntry } from "../helpers/process.ts";

// `bun run migrate --script`: every migration as one idempotent SQL script a DBA applies with psql.

let script: string;
const databases: TestDatabase[] = [];
beforeAll(async () => {
  const run = await runEntry("src/migrate.ts", ["--script"], {
    DATABASE_URL: "postgres://nowhere.invalid/x",
  });
  expect(run.exitCode).toBe(0);
  script = run.stdout;
});
stopChildrenAfterAll();
afterAll(async () => {
  for (const t of databases) await t.drop();
});

/** Applies the script as a DBA would: psql, stopping at the first error. */
async function psql(url: string): Promise<void> {
  const proc = tracked(
    Bun.spawn(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"], {
      stdin: new TextEncoder().encode(script),
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`psql failed (${code}): ${stderr}`);
}

/** Every column of every public table, with its type, default and nullability. */
async function shape(t: TestDatabase): Promise<string[]> {
  const rows = await execute<{ c: string }>(
    t.database.db,
    sql`select table_name || '.' || column_name || ' ' || data_type || ' ' || coalesce(column_default, '-') || ' ' || is_nullable as c
        from information_schema.columns where table_schema = 'public' order by 1`,
  );
  const indexes = await execute<{ c: string }>(
    t.database.db,
    sql`select indexdef as c from pg_indexes where schemaname = 'public' order by 1`,
  );
  return [...rows.map((r) => r.c), ...indexes.map((r) => r.c)];
}

test("on an empty database the script builds what the migrator builds, and the migrator then has nothing to do", async () => {
  const byScript = await createTestDatabase({ empty: true });
  const byMigrator = await createTestDatabase({ empty: true });
  databases.push(byScript, byMigrator);
  await psql(byScript.url);
  await migrate(byMigrator.database.db);
  expect(await shape(byScript)).toEqual(await shape(byMigrator));
  const status = await migrationStatus(byScript.database.db);
  expect(status.every((m) => m.applied && !m.changed)).toBe(true);
  expect(await migrate(byScript.database.db)).toEqual([]);
  // and again: a no-op
  await psql(byScript.url);
  expect(await shape(byScript)).toEqual(await shape(byMigrator));
});

test("on a database some versions behind it applies only the rest", async () => {
  const tags = readMigrations().map((m) => m.tag);
  const behind = await createTestDatabase({ empty: true });
  databases.push(behind);
  await migrate(behind.database.db, { to: tags[3] });
  await execute(behind.database.db, sql`insert into background_jobs (kind) values ('system.noop')`);
  await psql(behind.url);
  const status = await migrationStatus(behind.database.db);
  expect(status.map((m) => m.tag)).toEqual(tags);
  expect(status.every((m) => m.applied && !m.changed)).toBe(true);
  // the early ones were not run again: their rows and data are where they were
  const [jobs] = await execute<{ n: number }>(
    behind.database.db,
    sql`select count(*)::int as n from background_jobs`,
  );
  expect(jobs?.n).toBe(1);
});

test("--script excludes the other modes and needs no configuration", async () => {
  const run = await runEntry("src/migrate.ts", ["--script", "--status"], {});
  expect(run.exitCode).toBe(64);
  expect(script).toStartWith("-- Plinth");
  expect(script).toContain("COMMIT;");
});
