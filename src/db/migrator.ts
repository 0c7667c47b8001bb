import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { type Db, type Executor, execute } from "./client.ts";
import { type DatabaseFailure, describeDatabaseFailure } from "./database-failure.ts";

export const MIGRATIONS_DIR = fileURLToPath(new URL("../../drizzle/", import.meta.url));
/** Advisory lock key shared by every migrator: two at once run one after the other. */
export const MIGRATION_LOCK = 0x706c696e74; // "plint"
/**
 * Advisory lock key every serving API process holds shared (src/lifecycle.ts); `migrate --down`
 * takes it exclusively, so it cannot revert a schema a running API depends on.
 */
export const SERVING_LOCK = 0x706c696e73n; // "plins"

/** A migration statement PostgreSQL refused: its message, code and detail, and where. */
export class MigrationStatementError extends Error {
  constructor(
    readonly tag: string,
    readonly statement: string,
    readonly failure: DatabaseFailure,
  ) {
    super(`migration ${tag} failed: ${failure.message}${failure.code ? ` (${failure.code})` : ""}`);
  }

  /** Log fields: PostgreSQL's message, code, detail and hint, and the statement's first line. */
  fields(): Record<string, unknown> {
    return {
      migration: this.tag,
      message: this.failure.message,
      code: this.failure.code,
      detail: this.failure.detail,
      hint: this.failure.hint,
      statement: this.statement.split("\n")[0]?.slice(0, 200),
    };
  }
}

/** `migrate --down` while API processes serve from the database. */
export class MigrationBlockedError extends Error {
  constructor(readonly holders: number) {
    super(
      `${holders} API process${holders === 1 ? " is" : "es are"} connected to the database (serving lock held); stop ${holders === 1 ? "it" : "them"} first, or pass --force`,
    );
  }
}

async function runStatement(tx: Executor, tag: string, statement: string): Promise<void> {
  try {
    await tx.execute(sql.raw(statement));
  } catch (error) {
    throw new MigrationStatementError(tag, statement, describeDatabaseFailure(error));
  }
}

/** How many processes hold this database's serving lock (shared), from pg_locks: advisory locks are per database, and other databases on the server have their own APIs. */
export async function servingLockHolders(db: Executor): Promise<number> {
  const [row] = await execute<{ n: number }>(
    db,
    sql`select count(distinct pid)::int as n from pg_locks
        where locktype = 'advisory' and granted and objsubid = 1
          and database = (select oid from pg_database where datname = current_database())
          and (classid::bigint << 32) + objid::bigint = ${SERVING_LOCK.toString()}::bigint`,
  );
  return row?.n ?? 0;
}

export interface Migration {
  tag: string;
  hash: string;
  statements: string[];
  /** Statements of the hand-written Down step (drizzle/down/<tag>.sql), when there is one. */
  down?: string[];
}

export interface MigrationStatus {
  tag: string;
  applied: boolean;
  appliedAt: Date | null;
  hasDown: boolean;
  /** The file changed after it was applied. */
  changed: boolean;
}

function split(text: string): string[] {
  return text
    .split("--> statement-breakpoint")
    .map((statement) => statement.trim())
    .filter((statement) => statement.replace(/--.*$/gm, "").trim().length > 0);
}

/** Reads drizzle/meta/_journal.json and the SQL beside it, in order. */
export function readMigrations(dir = MIGRATIONS_DIR): Migration[] {
  const journal = JSON.parse(readFileSync(join(dir, "meta", "_journal.json"), "utf8")) as {
    entries: { idx: number; tag: string }[];
  };
  return [...journal.entries]
    .sort((a, b) => a.idx - b.idx)
    .map(({ tag }) => {
      const text = readFileSync(join(dir, `${tag}.sql`), "utf8");
      const downPath = join(dir, "down", `${tag}.sql`);
      return {
        tag,
        hash: createHash("sha256").update(text).digest("hex"),
        statements: split(text),
        down: existsSync(downPath) ? split(readFileSync(downPath, "utf8")) : undefined,
      };
    });
}

async function lockAndPrepare(tx: Executor): Promise<Map<string, { hash: string; appliedAt: Date }>> {
  await execute(tx, sql`select pg_advisory_xact_lock(${MIGRATION_LOCK})`);
  // the migrator is a platform operation: a data migration sees and writes every tenant's rows
  // even when the migrator is not a superuser (FORCE ROW LEVEL SECURITY holds the tables' owner)
  await execute(tx, sql`select set_config('plinth.platform', 'on', true)`);
  await execute(
    tx,
    sql`create table if not exists schema_migrations (
      tag text primary key,
      hash text not null,
      applied_at timestamptz not null default now()
    )`,
  );
  const rows = await execute<{ tag: string; hash: string; applied_at: Date | string }>(
    tx,
    sql`select tag, hash, applied_at from schema_migrations`,
  );
  return new Map(rows.map((row) => [row.tag, { hash: row.hash, appliedAt: new Date(row.applied_at) }]));
}

export interface MigrateOptions {
  dir?: string;
  /** Stop after this migration (tests and the switch-over rehearsal use it). */
  to?: string;
  /**
   * Told of each applied migration whose file no longer matches what was applied (it is not run
   * again; `--status` lists them too). An edited migration means databases may differ.
   */
  onChanged?: (tag: string) => void;
}

/**
 * Applies every pending migration in one transaction under an advisory lock, so a second migrator
 * waits and then finds nothing to do. Returns the tags it applied.
 */
export async function migrate(db: Db, options: MigrateOptions = {}): Promise<string[]> {
  const migrations = readMigrations(options.dir);
  if (options.to && !migrations.some((m) => m.tag === options.to))
    throw new Error(`unknown migration ${options.to}`);
  return db.transaction(async (tx) => {
    const applied = await lockAndPrepare(tx);
    const done: string[] = [];
    for (const migration of migrations) {
      const before = applied.get(migration.tag);
      if (before && before.hash !== migration.hash) options.onChanged?.(migration.tag);
      if (!before) {
        for (const statement of migration.statements) await runStatement(tx, migration.tag, statement);
        await execute(
          tx,
          sql`insert into schema_migrations (tag, hash) values (${migration.tag}, ${migration.hash})`,
        );
        done.push(migration.tag);
      }
      if (migration.tag === options.to) break;
    }
    return done;
  });
}

/** A dollar-quote tag that `text` does not contain. */
function dollarTag(text: string, base: string): string {
  let tag = `$${base}$`;
  for (let i = 1; text.includes(tag); i++) tag = `$${base}${i}$`;
  return tag;
}

/**
 * The whole migration history as one idempotent SQL script, for a DBA to review and apply by hand
 * (`bun run migrate --script`): the same transaction, advisory lock and `schema_migrations` rows as
 * `migrate`, each migration guarded by its tag, so the script can run against a database at any
 * version (and again), and the migrator afterwards finds nothing left to do. Needs no database.
 */
export function migrationScript(options: { dir?: string } = {}): string {
  const migrations = readMigrations(options.dir);
  const quote = (value: string) => `'${value.replaceAll("'", "''")}'`;
  const out = [
    "-- Plinth: every migration as one idempotent script (bun run migrate --script).",
    "-- Applies what a database does not have yet, in one transaction, as the migrator would.",
    "BEGIN;",
    `SELECT pg_advisory_xact_lock(${MIGRATION_LOCK});`,
    "SELECT set_config('plinth.platform', 'on', true);",
    "CREATE TABLE IF NOT EXISTS schema_migrations (tag text PRIMARY KEY, hash text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());",
  ];
  for (const migration of migrations) {
    const body = migration.statements.join("\n");
    const block = dollarTag(body, "migration");
    const statement = dollarTag(body, "statement");
    out.push(
      "",
      `-- ${migration.tag}`,
      `DO ${block}`,
      "BEGIN",
      `  IF EXISTS (SELECT 1 FROM schema_migrations WHERE tag = ${quote(migration.tag)}) THEN RETURN; END IF;`,
      ...migration.statements.map((text) => `  EXECUTE ${statement}${text}${statement};`),
      `  INSERT INTO schema_migrations (tag, hash) VALUES (${quote(migration.tag)}, ${quote(migration.hash)});`,
      `END ${block};`,
    );
  }
  out.push("", "COMMIT;", "");
  return out.join("\n");
}

/**
 * Runs the Down step of the latest applied migration that has one; returns its tag, or null.
 * Refused (MigrationBlockedError) while API processes hold the serving lock, unless `force`.
 */
export async function migrateDown(
  db: Db,
  options: { dir?: string; force?: boolean } = {},
): Promise<string | null> {
  const migrations = readMigrations(options.dir);
  return db.transaction(async (tx) => {
    const applied = await lockAndPrepare(tx);
    // exclusive for the transaction: no API starts serving while the schema goes back
    const [free] = await execute<{ ok: boolean }>(
      tx,
      sql`select pg_try_advisory_xact_lock(${SERVING_LOCK.toString()}::bigint) as ok`,
    );
    if (!free?.ok && !options.force) throw new MigrationBlockedError(await servingLockHolders(tx));
    const target = [...migrations].reverse().find((m) => applied.has(m.tag) && m.down);
    if (!target?.down) return null;
    for (const statement of target.down) await runStatement(tx, target.tag, statement);
    await execute(tx, sql`delete from schema_migrations where tag = ${target.tag}`);
    return target.tag;
  });
}

export async function migrationStatus(db: Db, options: { dir?: string } = {}): Promise<MigrationStatus[]> {
  const migrations = readMigrations(options.dir);
  const applied = await db.transaction((tx) => lockAndPrepare(tx));
  return migrations.map((m) => {
    const row = applied.get(m.tag);
    return {
      tag: m.tag,
      applied: row !== undefined,
      appliedAt: row?.appliedAt ?? null,
      hasDown: m.down !== undefined,
      changed: row !== undefined && row.hash !== m.hash,
    };
  });
}
