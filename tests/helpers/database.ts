import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { systemCtx } from "../../src/context.ts";
import { DEFAULT_APP_ROLE, ensureAppRole } from "../../src/db/app-role.ts";
import { type Database, type OpenDatabaseOptions, openDatabase } from "../../src/db/client.ts";
import { MIGRATIONS_DIR, migrate } from "../../src/db/migrator.ts";
import { seedCatalog } from "../../src/seed.ts";

/** The PostgreSQL server tests use; each test file gets its own database on it. */
export const SERVER_URL =
  process.env.PLINTH_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * Which topology the suite runs against: `single` (default: one PostgreSQL, one Redis) or `scaled`
 * (PLINTH_TEST_TOPOLOGY=scaled: every test database through PgBouncer in transaction mode with the
 * direct connection beside it, the cache a Redis Cluster; scripts/scaled-services.sh starts both).
 */
export const TOPOLOGY: "single" | "scaled" =
  process.env.PLINTH_TEST_TOPOLOGY === "scaled" ? "scaled" : "single";

/**
 * The role the app under test connects as: the API's role (`plinth_app`, made and granted by the
 * migrator and cloned with the template) unless PLINTH_TEST_API_ROLE names another, or is `owner`
 * (the app connects as the owner too). The app built by testDeps and every process given `env`
 * reach the test database as that role, held by row-level security, while the test's own `database`
 * stays the owner's connection (setup and assertions that see every row). Issue #30, docs/deployment.md
 * ("The database roles").
 */
export const API_ROLE_UNDER_TEST: string | null = apiRoleUnderTest(process.env.PLINTH_TEST_API_ROLE);

function apiRoleUnderTest(value: string | undefined): string | null {
  if (value === "owner") return null;
  return value || DEFAULT_APP_ROLE;
}

/** PgBouncer (`pool_mode = transaction`) in front of SERVER_URL's PostgreSQL. */
export const POOLER_URL = process.env.PLINTH_TEST_POOLER_URL ?? "postgres://postgres@127.0.0.1:6432/postgres";

export function databaseUrl(name: string, base = SERVER_URL): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

/** What the template is made of: the migrations, and the seeders with the catalogs they write. */
function templateFingerprint(): string {
  const hash = createHash("sha256");
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir).sort()) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else hash.update(entry).update(readFileSync(path));
    }
  };
  walk(MIGRATIONS_DIR);
  walk(join(MIGRATIONS_DIR, "../src/db"));
  walk(join(MIGRATIONS_DIR, "../src/billing"));
  hash.update(readFileSync(join(MIGRATIONS_DIR, "../src/seed.ts")));
  return hash.digest("hex").slice(0, 12);
}

let templateReady: Promise<string> | undefined;

/** A database migrated and seeded by the production migrator, cloned for each test database. */
async function ensureTemplate(): Promise<string> {
  const name = `plinth_tpl_${templateFingerprint()}`;
  const admin = postgres(SERVER_URL, { max: 1, onnotice: () => {} });
  try {
    const conn = await admin.reserve();
    try {
      // a session lock serialises template creation across parallel test processes
      await conn`select pg_advisory_lock(7400101)`;
      const [exists] = await conn`select 1 from pg_database where datname = ${name}`;
      if (!exists) {
        await conn.unsafe(`drop database if exists "${name}_build" with (force)`);
        // from template0, which nobody can connect to: CREATE DATABASE from template1 fails while any
        // session (a psql, a pooler's auth query) sits in template1
        await conn.unsafe(`create database "${name}_build" template template0`);
        const database = await openDatabase(databaseUrl(`${name}_build`), { poolSize: 1 });
        try {
          await migrate(database.db);
          await seedCatalog({ database }, systemCtx("migrator"));
          // as `bun run migrate` does: the API's role (cluster-wide) and its grants (cloned with the template)
          await ensureAppRole(database.db, { role: DEFAULT_APP_ROLE });
        } finally {
          await database.close();
        }
        await conn.unsafe(`alter database "${name}_build" rename to "${name}"`);
      }
    } finally {
      await conn`select pg_advisory_unlock(7400101)`;
      conn.release();
    }
  } finally {
    await admin.end();
  }
  return name;
}

export interface TestDatabase {
  name: string;
  /** What the app is given as its database: through PgBouncer in the scaled topology. */
  url: string;
  /** Straight to PostgreSQL; beside `url` in the scaled topology. */
  directUrl: string;
  /** The owner's connection: the test's setup and assertions. */
  database: Database;
  /** What the app under test is given (testDeps swaps `database` for it): API_ROLE_UNDER_TEST's, else `database`. */
  appDatabase: Database;
  /** The variables a process needs to reach this database in this topology. */
  env: Record<string, string>;
  drop(): Promise<void>;
}

/**
 * A fresh database for one test file (or test): a clone of the migrated template, or an empty
 * database with `{ empty: true }` for migrator tests.
 */
export async function createTestDatabase(
  options: { empty?: boolean; poolSize?: number } = {},
): Promise<TestDatabase> {
  const name = `plinth_test_${process.pid}_${crypto.randomUUID().slice(0, 8)}`;
  const admin = postgres(SERVER_URL, { max: 1, onnotice: () => {} });
  try {
    if (options.empty) await admin.unsafe(`create database "${name}" template template0`);
    else {
      templateReady ??= ensureTemplate();
      const template = await templateReady;
      await admin.unsafe(`create database "${name}" template "${template}"`);
    }
  } finally {
    await admin.end();
  }
  const url = testDatabaseUrl(name);
  const directUrl = databaseUrl(name);
  const database = await openTestDatabase(url, { poolSize: options.poolSize ?? 5 });
  // an empty database (the migrator's tests) has no grants for the app role: the owner's alone
  const role = options.empty ? null : API_ROLE_UNDER_TEST;
  const appDatabase = role
    ? await openTestDatabase(asRole(url, role), { poolSize: options.poolSize ?? 5 })
    : database;
  appDatabases.set(database, appDatabase);
  ownerDatabases.set(appDatabase, database);
  return {
    name,
    url,
    directUrl,
    database,
    appDatabase,
    env: topologyEnv(role ? asRole(url, role) : url),
    drop: async () => {
      if (appDatabase !== database) await appDatabase.close();
      await database.close();
      const cleanup = postgres(SERVER_URL, { max: 1, onnotice: () => {} });
      try {
        await cleanup.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await cleanup.end();
      }
    },
  };
}

const appDatabases = new WeakMap<Database, Database>();
const ownerDatabases = new WeakMap<Database, Database>();

/** The connection the app under test gets for a test database's owner connection (itself when none). */
export function appDatabaseOf(database: Database): Database {
  return appDatabases.get(database) ?? database;
}

/** The owner's connection behind an app's (a helper's setup through `deps`); itself when it is one. */
export function ownerDatabaseOf(database: Database): Database {
  return ownerDatabases.get(database) ?? database;
}

/** `url` with `role` as its user (the local PostgreSQL and PgBouncer trust it on loopback: no password). */
export function asRole(url: string, role: string): string {
  const parsed = new URL(url);
  parsed.username = role;
  parsed.password = "";
  return parsed.toString();
}

/** The database URL of test database `name` in this topology. */
export function testDatabaseUrl(name: string): string {
  return TOPOLOGY === "scaled" ? databaseUrl(name, POOLER_URL) : databaseUrl(name);
}

/** The direct URL beside a pooler URL of this topology (the same URL in the single one). */
function directOf(url: string): string {
  const parsed = new URL(url);
  const pooler = new URL(POOLER_URL);
  if (TOPOLOGY !== "scaled" || parsed.host !== pooler.host) return url;
  return databaseUrl(parsed.pathname.slice(1));
}

/**
 * Opens `url` (a test database's) as the app would in this topology: in the scaled one through the
 * pooler in transaction mode, with the direct connection for LISTEN and session locks.
 */
export function openTestDatabase(url: string, options: OpenDatabaseOptions = {}): Promise<Database> {
  const direct = directOf(url);
  if (direct === url) return openDatabase(url, options);
  return openDatabase(url, { ...options, poolMode: "transaction", directUrl: direct });
}

/** DATABASE_URL (and, scaled, DATABASE_DIRECT_URL and Database__PoolMode) for a process. */
export function topologyEnv(url: string): Record<string, string> {
  const direct = directOf(url);
  if (direct === url) return { DATABASE_URL: url };
  return { DATABASE_URL: url, DATABASE_DIRECT_URL: direct, Database__PoolMode: "transaction" };
}

/**
 * The variables a process needs to reach test database `url` as the API's role (API_ROLE_UNDER_TEST,
 * `plinth_app` also when PLINTH_TEST_API_ROLE=owner), an empty database's too (its migrator grants the
 * role the tables): what a Production API is started with, since Production refuses the owner (a
 * superuser here). docs/deployment.md, "The database roles".
 */
export function appRoleEnv(url: string): Record<string, string> {
  return topologyEnv(asRole(url, API_ROLE_UNDER_TEST ?? DEFAULT_APP_ROLE));
}
