import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import {
  MigrationStatementError,
  migrate,
  migrateDown,
  migrationStatus,
  readMigrations,
} from "../../src/db/migrator.ts";
import { seedCatalog } from "../../src/seed.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/database.ts";

/** Runs Down steps, newest first, until `tag`'s has run; the tags reverted, in that order. */
async function downTo(t: TestDatabase, tag: string): Promise<string[]> {
  const reverted: string[] = [];
  for (;;) {
    const next = await migrateDown(t.database.db);
    if (!next) throw new Error(`no Down step left before ${tag}`);
    reverted.push(next);
    if (next === tag) return reverted;
  }
}

async function tables(t: TestDatabase): Promise<string[]> {
  const rows = await execute<{ table_name: string }>(
    t.database.db,
    sql`select table_name from information_schema.tables where table_schema = 'public' order by 1`,
  );
  return rows.map((r) => r.table_name);
}

describe("migrator on an empty database", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase({ empty: true });
  });
  afterAll(() => t.drop());

  test("applies every migration, then a second run is a no-op", async () => {
    const all = readMigrations().map((m) => m.tag);
    expect(await migrate(t.database.db)).toEqual(all);
    expect(await migrate(t.database.db)).toEqual([]);
    const status = await migrationStatus(t.database.db);
    expect(status.every((m) => m.applied && !m.changed)).toBe(true);
    expect(await tables(t)).toContain("background_jobs");
    expect(await tables(t)).not.toContain("inbox_messages");
  });

  test("an applied migration whose file changed is reported, not run again", async () => {
    const [first] = readMigrations();
    if (!first) throw new Error("no migrations");
    await execute(
      t.database.db,
      sql`update schema_migrations set hash = 'hash-of-an-older-edit' where tag = ${first.tag}`,
    );
    const changed: string[] = [];
    expect(await migrate(t.database.db, { onChanged: (tag) => changed.push(tag) })).toEqual([]);
    expect(changed).toEqual([first.tag]);
    const status = await migrationStatus(t.database.db);
    expect(status.find((m) => m.tag === first.tag)?.changed).toBe(true);
    await execute(
      t.database.db,
      sql`update schema_migrations set hash = ${first.hash} where tag = ${first.tag}`,
    );
  });

  test("seeding twice leaves one copy of the catalog", async () => {
    await seedCatalog(t, systemCtx("test"));
    await seedCatalog(t, systemCtx("test"));
    const roles = await execute<{ code: string }>(
      t.database.db,
      sql`select code from platform_roles order by code`,
    );
    expect(roles.map((r) => r.code)).toEqual(["platform_admin", "platform_viewer"]);
  });

  test("--down of 0020 drops rate limits (the keys and buckets); migrating again restores them", async () => {
    await execute(
      t.database.db,
      sql`insert into background_jobs (kind, rate_key) values ('system.noop', 'api-1')`,
    );
    await execute(t.database.db, sql`insert into job_rate_limits (rate_key) values ('api-1')`);
    const reverted = await downTo(t, "0020_job_rate_limits");
    expect(await tables(t)).not.toContain("job_rate_limits");
    const columns = await execute<{ column_name: string }>(
      t.database.db,
      sql`select column_name from information_schema.columns where table_name = 'background_jobs'`,
    );
    expect(columns.map((c) => c.column_name)).not.toContain("rate_key");
    // the jobs stay (without a rate)
    expect(await execute(t.database.db, sql`select id from background_jobs`)).toHaveLength(1);
    expect(await migrate(t.database.db)).toEqual([...reverted].reverse());
    expect(await tables(t)).toContain("job_rate_limits");
    await execute(t.database.db, sql`delete from background_jobs`);
  });

  test("--down of 0025 spells a canceled job `cancelled` again; migrating again renames it back", async () => {
    const [job] = await execute<{ id: number }>(
      t.database.db,
      sql`insert into background_jobs (kind, status, finished_at) values ('system.noop', 'canceled', now()) returning id::int as id`,
    );
    const statusOf = async () =>
      (
        await execute<{ status: string }>(
          t.database.db,
          sql`select status from background_jobs where id = ${job?.id}`,
        )
      )[0]?.status;
    const reverted = await downTo(t, "0025_job_status_canceled");
    expect(await statusOf()).toBe("cancelled");
    expect(await migrate(t.database.db)).toEqual([...reverted].reverse());
    expect(await statusOf()).toBe("canceled");
    await execute(t.database.db, sql`delete from background_jobs`);
  });

  test("--down of 0018 drops flows, results and debounce, cancelling waiting jobs; migrating again restores the columns", async () => {
    const [parent] = await execute<{ id: number }>(
      t.database.db,
      sql`insert into background_jobs (kind, result, has_dependents) values ('system.noop', '{"a": 1}', true) returning id::int as id`,
    );
    const [child] = await execute<{ id: number }>(
      t.database.db,
      sql`insert into background_jobs (kind, status, waiting_on) values ('system.noop', 'waiting', 1) returning id::int as id`,
    );
    await execute(
      t.database.db,
      sql`insert into job_dependencies (parent_id, child_id) values (${parent?.id}, ${child?.id})`,
    );
    // newer migrations with a Down step go first, then 0018's
    const reverted = await downTo(t, "0018_job_flows");
    expect(await tables(t)).not.toContain("job_dependencies");
    const columns = await execute<{ column_name: string }>(
      t.database.db,
      sql`select column_name from information_schema.columns where table_name = 'background_jobs'`,
    );
    for (const name of ["flow_id", "result", "waiting_on", "debounce_key", "has_dependents"])
      expect(columns.map((c) => c.column_name)).not.toContain(name);
    const [was] = await execute<{ status: string }>(
      t.database.db,
      sql`select status from background_jobs where id = ${child?.id}`,
    );
    expect(was?.status).toBe("cancelled");
    expect(await migrate(t.database.db)).toEqual([...reverted].reverse());
    expect(await tables(t)).toContain("job_dependencies");
    await execute(t.database.db, sql`delete from background_jobs`);
  });

  test("--down recreates the broker tables empty; migrating again removes them", async () => {
    await execute(t.database.db, sql`insert into background_jobs (kind) values ('system.noop')`);
    // the newest migrations with a Down step go first (0018's among them), 0001's last
    const reverted = await downTo(t, "0001_remove_message_broker");
    expect(reverted).toContain("0018_job_flows");
    expect(await tables(t)).toEqual(expect.arrayContaining(["inbox_messages", "outbox_messages"]));
    const inbox = await execute(t.database.db, sql`select * from inbox_messages`);
    expect(inbox).toHaveLength(0);
    const pending = (await migrationStatus(t.database.db)).filter((m) => !m.applied).map((m) => m.tag);
    expect(pending).toEqual([...reverted].reverse());

    expect(await migrate(t.database.db)).toEqual([...reverted].reverse());
    expect(await tables(t)).not.toContain("inbox_messages");
    // jobs survive the round trip
    const jobs = await execute(t.database.db, sql`select id from background_jobs`);
    expect(jobs).toHaveLength(1);
  });
});

describe("two migrators at once", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase({ empty: true, poolSize: 4 });
  });
  afterAll(() => t.drop());

  test("one applies everything, the other waits on the lock and finds nothing to do", async () => {
    const results = await Promise.all([
      migrate(t.database.db),
      migrate(t.database.db),
      migrate(t.database.db),
    ]);
    const applied = results.flat();
    expect(applied).toEqual(readMigrations().map((m) => m.tag));
    expect(results.filter((r) => r.length === 0)).toHaveLength(2);
  });
});

describe("partial history", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase({ empty: true });
  });
  afterAll(() => t.drop());

  test("`to` stops at the broker-era baseline", async () => {
    expect(await migrate(t.database.db, { to: "0000_baseline" })).toEqual(["0000_baseline"]);
    expect(await tables(t)).toEqual(
      expect.arrayContaining(["inbox_messages", "outbox_messages", "background_jobs"]),
    );
  });
});

describe("a statement PostgreSQL refuses", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase({ empty: true });
  });
  afterAll(() => t.drop());

  test("the error carries PostgreSQL's message, code and detail, and nothing is applied", async () => {
    const dir = mkdtempSync(join(tmpdir(), "plinth-migrations-"));
    mkdirSync(join(dir, "meta"));
    writeFileSync(
      join(dir, "meta", "_journal.json"),
      JSON.stringify({ entries: [{ idx: 0, tag: "0000_dupes" }] }),
    );
    writeFileSync(
      join(dir, "0000_dupes.sql"),
      "CREATE TABLE dupes (id int PRIMARY KEY);\n--> statement-breakpoint\nINSERT INTO dupes VALUES (1), (1);",
    );
    const error = await migrate(t.database.db, { dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationStatementError);
    const fields = (error as MigrationStatementError).fields();
    expect(fields).toMatchObject({
      migration: "0000_dupes",
      code: "23505",
      message: 'duplicate key value violates unique constraint "dupes_pkey"',
      detail: "Key (id)=(1) already exists.",
      statement: "INSERT INTO dupes VALUES (1), (1);",
    });
    expect((error as Error).message).not.toContain("Failed query");
    expect(await tables(t)).not.toContain("dupes"); // one transaction: rolled back
  });
});
