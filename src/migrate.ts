import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { loadCliContext } from "./cli.ts";
import type { AppConfig } from "./config/load.ts";
import { systemCtx } from "./context.ts";
import { AppRoleError, ensureAppRole } from "./db/app-role.ts";
import { type Database, openDatabase } from "./db/client.ts";
import { describeDatabaseFailure } from "./db/database-failure.ts";
import {
  MigrationBlockedError,
  MigrationStatementError,
  migrate,
  migrateDown,
  migrationScript,
  migrationStatus,
} from "./db/migrator.ts";
import {
  BootstrapRefusedError,
  bootstrapPlatformAdmin,
  checkBootstrapInput,
  platformAdminExists,
} from "./identity/bootstrap.ts";
import { seedCatalog } from "./seed.ts";
import type { Logger } from "./telemetry/logger.ts";

export const EXIT = {
  ok: 0,
  /** Configuration invalid, database unreachable, a migration failed. */
  failure: 1,
  /** --bootstrap-platform-admin while a platform-role binding exists; nothing was changed. */
  bootstrapRefused: 2,
  /** Bootstrap input missing or too weak; nothing was changed. */
  bootstrapInput: 3,
  /** --down found no applied migration with a Down step. */
  nothingToRevert: 4,
  /** --down while API processes serve from the database (without --force); nothing was changed. */
  downBlocked: 5,
  usage: 64,
} as const;

const HELP = `Usage: bun run migrate [options]

Applies pending migrations (in one transaction, under an advisory lock), seeds the built-in
catalog, and bootstraps the first platform administrator where allowed.

Options:
  --bootstrap-platform-admin  Create the first platform administrator from
                              PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL, _PASSWORD (at least 12
                              characters, temporary: it must be changed at first login) and _NAME.
                              Required in Production. Refused when any platform-role binding exists.
                              Migrates and seeds first, so it is the whole first install.
  --down                      Run the Down step of the latest applied migration that has one.
                              Refused (exit 5) while API processes are connected to the database
                              (each holds a shared advisory lock while serving); stop them first.
  --force                     With --down: revert even while API processes are connected.
  --status                    List applied and pending migrations.
  --script                    Print every migration as one idempotent SQL script (for review, or to
                              apply by hand: psql -f); connects to no database, changes nothing.
  --help                      Show this help.

Without the flag, Development and Staging bootstrap the administrator when the three variables
are set and none exists yet; Production never does.

The database comes from ConnectionStrings:Database, else DATABASE_URL, else (Development only)
postgres://<OS user>@localhost:5432/plinth.

Exit codes: 0 done; 1 configuration or database failure; 2 bootstrap refused (an administrator
exists, nothing changed); 3 bootstrap input missing or weak; 4 nothing to revert; 5 --down refused
while API processes are connected (nothing changed); 64 bad usage.
`;

interface Flags {
  bootstrap: boolean;
  down: boolean;
  status: boolean;
  /** With `down`: revert even while API processes hold the serving lock. */
  force?: boolean;
  /**
   * `npm run dev`: without bootstrap input and without an administrator, create one with a generated
   * password and report it here (the only place it ever appears); a given input is reported without it.
   */
  quickstart?: {
    admin?: { email: string; password?: string; existed?: boolean };
    /** Why the given administrator was refused (the variable and the rule it broke, never the value). */
    refused?: string[];
  };
}

/**
 * Logs why migrating failed, as an operator can act on it: PostgreSQL's message, code and detail
 * for a refused statement, the connection failure's class and code otherwise. Returns the exit code.
 */
export function reportMigratorFailure(
  logger: Logger,
  error: unknown,
  redact: (text: string) => string,
): number {
  if (error instanceof MigrationStatementError) {
    logger.error("migration failed", error.fields());
    return EXIT.failure;
  }
  if (error instanceof MigrationBlockedError) {
    logger.error("migrate --down refused: API processes are connected to the database; nothing changed", {
      holders: error.holders,
      hint: "stop every API process (they hold a shared advisory lock while serving), or pass --force",
    });
    return EXIT.downBlocked;
  }
  const failure = describeDatabaseFailure(error);
  logger.error("migrator failed", {
    cause: failure.class,
    code: failure.code,
    error: redact(failure.message),
    detail: failure.detail,
  });
  return EXIT.failure;
}

/** `--status` as a table whose columns line up whatever the tags' lengths. */
export function formatMigrationStatus(
  rows: { tag: string; applied: boolean; appliedAt?: Date | null; hasDown: boolean; changed: boolean }[],
): string {
  const table = [
    ["MIGRATION", "STATE", "APPLIED AT", "NOTES"],
    ...rows.map((m) => [
      m.tag,
      m.applied ? "applied" : "pending",
      m.applied && m.appliedAt ? m.appliedAt.toISOString() : "-",
      [m.hasDown ? "has Down step" : "", m.changed ? "FILE CHANGED SINCE APPLIED" : ""]
        .filter(Boolean)
        .join(", "),
    ]),
  ];
  const widths = [0, 1, 2].map((i) => Math.max(...table.map((row) => (row[i] ?? "").length)));
  return table
    .map((row) =>
      `${row.map((cell, i) => (i < 3 ? cell.padEnd(widths[i] ?? 0) : cell)).join("  ")}`.trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join("");
}

/**
 * Creates or checks the API's role (`Database:AppRole`) and grants it the tables, after every
 * migration (new tables need the grant). A role that cannot be made or used fails Production's
 * migrator; elsewhere it is a warning, so a development database the migrator may not add roles to
 * still migrates (the API then runs as whoever DATABASE_URL names).
 */
async function grantAppRole(config: AppConfig, database: Database, logger: Logger): Promise<boolean> {
  const { AppRole: role, AppRolePassword: password } = config.settings.Database;
  try {
    const { created } = await ensureAppRole(database.db, { role, password });
    logger.info(created ? "API role created and granted" : "API role checked and granted", { role });
    return true;
  } catch (error) {
    if (!(error instanceof AppRoleError)) throw error;
    const fields = { role, problem: error.message, hint: "docs/deployment.md, 'The database roles'" };
    if (config.environment === "Production") {
      logger.error("the API's database role is unusable", fields);
      return false;
    }
    logger.warn("the API's database role is unusable", fields);
    return true;
  }
}

/** Migrates, seeds and bootstraps as the flags and environment say. Returns an exit code. */
export async function runMigrator(
  config: AppConfig,
  database: Database,
  flags: Flags,
  logger: Logger,
): Promise<number> {
  const { db } = database;
  const deps = { database };
  const ctx = systemCtx("migrator");
  if (flags.status) {
    process.stdout.write(formatMigrationStatus(await migrationStatus(db)));
    return EXIT.ok;
  }
  if (flags.down) {
    const reverted = await migrateDown(db, { force: flags.force });
    if (flags.force) logger.warn("--force: reverting even if API processes are connected");
    if (!reverted) {
      logger.error("no applied migration has a Down step; nothing reverted");
      return EXIT.nothingToRevert;
    }
    logger.info("migration reverted", { migration: reverted });
    return EXIT.ok;
  }

  const b = config.settings.Bootstrap;
  const input = { email: b.PlatformAdminEmail, password: b.PlatformAdminPassword, name: b.PlatformAdminName };
  if (flags.bootstrap) {
    if (await platformAdminExists(deps, ctx)) {
      logger.error(
        "bootstrap refused: a platform administrator (platform-role binding) already exists; nothing changed",
      );
      return EXIT.bootstrapRefused;
    }
    const problems = await checkBootstrapInput(input);
    if (problems.length > 0) {
      logger.error("bootstrap input refused; nothing changed", { problems });
      return EXIT.bootstrapInput;
    }
  }

  const applied = await migrate(db, {
    onChanged: (tag) =>
      logger.warn("an applied migration's file has changed since it was applied; it is not run again", {
        tag,
        hint: "restore the file as applied and put the change in a new migration (bun run db:generate)",
      }),
  });
  logger.info(applied.length ? "migrations applied" : "database is up to date", { applied });
  const seeded = await seedCatalog(deps, ctx);
  logger.info("catalog seeded", { seeders: seeded });
  if (database.driver === "postgres" && !(await grantAppRole(config, database, logger))) return EXIT.failure;

  const anyInput = Boolean(input.email || input.password || input.name);
  let bootstrap = flags.bootstrap;
  const quickstart = flags.quickstart;
  if (quickstart && !anyInput) {
    if (await platformAdminExists(deps, ctx)) quickstart.admin = { email: "", existed: true };
    else {
      Object.assign(input, {
        email: "admin@example.com",
        password: generatedPassword(),
        name: "Quickstart Admin",
      });
      quickstart.admin = { email: input.email ?? "", password: input.password };
      bootstrap = true;
    }
  }
  if (!bootstrap && anyInput) {
    if (config.environment === "Production") {
      logger.warn(
        "bootstrap variables are set but ignored: Production bootstraps only with --bootstrap-platform-admin",
      );
    } else if (await platformAdminExists(deps, ctx)) {
      logger.info("bootstrap skipped: a platform administrator already exists");
    } else {
      const problems = await checkBootstrapInput(input);
      if (problems.length > 0) {
        logger.error("bootstrap input refused", { problems });
        if (quickstart) quickstart.refused = problems;
        return EXIT.bootstrapInput;
      }
      bootstrap = true;
    }
  }
  if (bootstrap) {
    try {
      const { userId } = await bootstrapPlatformAdmin(deps, systemCtx("bootstrap"), {
        email: input.email ?? "",
        password: input.password ?? "",
        name: input.name ?? "",
      });
      logger.info("platform administrator created; the password must be changed at first login", { userId });
      if (quickstart && !quickstart.admin) quickstart.admin = { email: input.email ?? "" };
    } catch (error) {
      if (error instanceof BootstrapRefusedError) {
        logger.error("bootstrap refused: a platform administrator already exists");
        return EXIT.bootstrapRefused;
      }
      throw error;
    }
  }
  return EXIT.ok;
}

async function main(argv: string[]): Promise<number> {
  let flags: Flags;
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        "bootstrap-platform-admin": { type: "boolean", default: false },
        down: { type: "boolean", default: false },
        force: { type: "boolean", default: false },
        status: { type: "boolean", default: false },
        script: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(HELP);
      return EXIT.ok;
    }
    flags = {
      bootstrap: values["bootstrap-platform-admin"],
      down: values.down,
      status: values.status,
      force: values.force,
    };
    if (values.force && !values.down) throw new Error("--force goes with --down only");
    if ([flags.bootstrap, flags.down, flags.status, values.script].filter(Boolean).length > 1) {
      throw new Error("--bootstrap-platform-admin, --down, --status and --script exclude each other");
    }
    if (values.script) {
      process.stdout.write(migrationScript());
      return EXIT.ok;
    }
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}`);
    return EXIT.usage;
  }

  const context = loadCliContext("migrator", { process: "migrator" });
  if (!context) return EXIT.failure;
  const { config, redactor, logger } = context;
  let database: Database | undefined;
  try {
    // the direct connection when there is one: the migrator's locks and DDL never go through a pooler
    database = await openDatabase(config.database.directUrl ?? config.database.url, {
      poolSize: 2,
      applicationName: "plinth-migrator",
      poolMode: config.database.directUrl ? "session" : config.database.poolMode,
    });
    return await runMigrator(config, database, flags, logger);
  } catch (error) {
    return reportMigratorFailure(logger, error, redactor.text);
  } finally {
    await database?.close();
  }
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}

/** A strong temporary password: 24 characters of base64url from 18 random bytes. */
function generatedPassword(): string {
  return randomBytes(18).toString("base64url");
}
