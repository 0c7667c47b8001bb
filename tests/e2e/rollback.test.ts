import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { migrate, migrationStatus } from "../../src/db/migrator.ts";
import { createTestDatabase } from "../helpers/database.ts";
import { cleanEnv, ROOT, runEntry } from "../helpers/process.ts";

/**
 * Issue #15, point 8: the switch-over runbook's backup and restore, exactly as written there (the
 * blocks marked `e2e: backup` and `e2e: restore` are read from docs/runbooks/switch-over.md and run
 * with bash), bring the old schema back exactly after the new release migrated the database.
 */
const t = await createTestDatabase({ empty: true });
afterAll(() => t.drop());

function runbookBlock(marker: string): string {
  const text = readFileSync(join(ROOT, "docs/runbooks/switch-over.md"), "utf8");
  const at = text.indexOf(`<!-- e2e: ${marker} `);
  if (at < 0) throw new Error(`no block marked e2e: ${marker} in the runbook`);
  const block = /```sh\n([\s\S]*?)\n\s*```/.exec(text.slice(at));
  if (!block?.[1]) throw new Error(`no sh block after e2e: ${marker}`);
  // the runbook indents its blocks under list items
  return block[1]
    .split("\n")
    .map((line) => line.replace(/^ {3}/, ""))
    .join("\n");
}

const work = mkdtempSync(join(tmpdir(), "plinth-rollback-"));
function sh(script: string): { exitCode: number; out: string } {
  const run = Bun.spawnSync(["bash", "-euo", "pipefail", "-c", script], {
    cwd: work,
    env: cleanEnv({ DATABASE_URL: t.url }),
  });
  return { exitCode: run.exitCode, out: `${run.stdout.toString()}${run.stderr.toString()}` };
}

/** Everything that must come back: the schema and every row, as pg_dump prints them. */
function snapshot(): { schema: string; data: string } {
  // pg_dump's \restrict lines carry a random key per run
  const dump = (flag: string) =>
    Bun.spawnSync(["pg_dump", flag, t.url])
      .stdout.toString()
      .split("\n")
      .filter((line) => !/^\\(un)?restrict /.test(line))
      .join("\n");
  return { schema: dump("--schema-only"), data: dump("--data-only") };
}

test("back up, migrate forward, restore: the old schema and rows are back exactly", async () => {
  const db = t.database.db;
  // the message-broker version's database, with rows
  await migrate(db, { to: "0000_baseline" });
  await execute(
    db,
    sql`insert into inbox_messages (id, message_type, payload) values (gen_random_uuid(), 'tenant.created', '{"n":1}'::jsonb)`,
  );
  await execute(
    db,
    sql`insert into background_jobs (kind, payload) values ('legacy.report', '{"n":1}'::jsonb)`,
  );
  const before = snapshot();
  expect(before.data).toContain("0000_baseline");

  const backup = sh(runbookBlock("backup"));
  expect(backup).toMatchObject({ exitCode: 0 });
  expect(backup.out).toContain("backup readable");

  // the new release migrates and writes
  const env = { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: t.url };
  expect((await runEntry("src/migrate.ts", [], env)).exitCode).toBe(0);
  expect((await migrationStatus(db)).every((m) => m.applied)).toBe(true);
  await execute(db, sql`insert into background_jobs (kind, payload) values ('new.kind', '{}'::jsonb)`);
  expect(snapshot().schema).not.toBe(before.schema);

  const restore = sh(runbookBlock("restore"));
  expect(restore.out).toBe("");
  expect(restore.exitCode).toBe(0);

  const after = snapshot();
  expect(after.schema).toBe(before.schema);
  expect(after.data).toBe(before.data);
  const status = await migrationStatus(db);
  expect(status.filter((m) => m.applied).map((m) => m.tag)).toEqual(["0000_baseline"]);

  // and the migrator takes it forward again
  expect((await runEntry("src/migrate.ts", [], env)).exitCode).toBe(0);
  expect((await migrationStatus(db)).every((m) => m.applied && !m.changed)).toBe(true);
}, 60_000);
