import { parseArgs } from "node:util";
import { openDatabase } from "./db/client.ts";
import { bunServeOptions } from "./http/bun-serve.ts";
import { type RuntimeAdapter, runApi } from "./lifecycle.ts";
import { reportMigratorFailure, runMigrator } from "./migrate.ts";
import { MIN_PASSWORD_LENGTH, MIN_PASSWORD_SCORE } from "./security/passwords.ts";

const HELP = `Usage: bun run start [--migrate] [--embedded]

Serves the Plinth API on Server:Port (or PORT; default 8080).

  --migrate   Apply migrations, seed the catalog and (outside Production) bootstrap the first
              administrator before serving. With embedded PGlite this is the only way, since a
              PGlite directory is open in one process at a time.
  --embedded  With no database configured (Development), use embedded PGlite in ./.data/dev
              instead of PostgreSQL on localhost.
  --help      Show this help.

Before serving it compares the migrations it ships with those applied: with any pending, Production
refuses to start (exit 1, naming them); other environments serve, but /api/health/ready answers 503
(database:migrations) and the background loops wait until the database is migrated.

In Production it refuses to start (exit 1) when it connects as a superuser, a BYPASSRLS role or an
owner of the tables: connect as Database:AppRole (plinth_app), which \`bun run migrate\` creates and
grants; with --migrate, give the owner's connection as DATABASE_DIRECT_URL.

Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT); 1 on invalid configuration, pending migrations,
a database role row-level security does not hold or a tenant-secret master key other than the one
recorded for its key id in Production (also when found once the database is back, after a drain),
a port in use, background loops that failed to start, or another failed start ("Start-up failed: …");
with --migrate, the migrator's own codes (2, 3: bun run migrate --help); 64 bad usage; 143 (SIGTERM)
or 130 (SIGINT) before serving.
`;

async function main(argv: string[]): Promise<number> {
  let flags: { migrate: boolean; embedded: boolean };
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        migrate: { type: "boolean", default: false },
        embedded: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
    if (values.help) {
      process.stdout.write(HELP);
      return 0;
    }
    flags = { migrate: values.migrate, embedded: values.embedded };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}`);
    return 64;
  }
  // `npm run dev`: Development on the embedded default database; its block is printed once listening
  let quickstart: QuickstartReport | undefined;
  return runApi(bun, {
    config: { embeddedFallback: flags.embedded },
    listening: (port) => {
      if (quickstart) process.stdout.write(quickstartBlock(port, quickstart));
    },
    prepare: flags.migrate
      ? async (config, deps) => {
          if (config.environment === "Development" && config.database.source === "embedded default")
            quickstart = {};
          // beside a transaction pooler the migrator runs over the direct connection
          const direct = config.database.directUrl
            ? await openDatabase(config.database.directUrl, {
                poolSize: 2,
                applicationName: "plinth-migrator",
              })
            : undefined;
          const database = direct ?? deps.database;
          // a migration's statement (an index built on a large table) may rightly outlast the answer timeout
          const unbounded = database.withoutAnswerTimeout ?? ((work) => work());
          try {
            const code = await unbounded(() =>
              runMigrator(
                config,
                database,
                { bootstrap: false, down: false, status: false, quickstart },
                deps.logger,
              ),
            );
            if (quickstart?.refused) process.stderr.write(refusedBlock(quickstart.refused));
            return code;
          } catch (error) {
            return reportMigratorFailure(deps.logger, error, deps.redactor.text);
          } finally {
            await direct?.close();
          }
        }
      : undefined,
  });
}

type QuickstartReport = NonNullable<Parameters<typeof runMigrator>[2]["quickstart"]>;

/** Instead of the block, when the administrator `npm run dev` was given is refused: why, and the rule. */
function refusedBlock(problems: string[]): string {
  const password = problems.some((p) => p.startsWith("PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD "));
  return `${[
    "",
    "Plinth did not start: the administrator in PLINTH_BOOTSTRAP_PLATFORM_ADMIN_* was refused.",
    ...problems.map((p) => `  ${p}`),
    ...(password
      ? [
          `  The rule: at least ${MIN_PASSWORD_LENGTH} characters, not built from the e-mail address or name, and hard`,
          `  to guess (zxcvbn score ${MIN_PASSWORD_SCORE} of 4): a long passphrase or a generated password.`,
        ]
      : []),
    "  Or unset PLINTH_BOOTSTRAP_PLATFORM_ADMIN_*: npm run dev then makes an administrator with a",
    "  generated password and prints it once.",
    "",
  ].join("\n")}\n`;
}

/** The one block `npm run dev` prints: where everything is, and the administrator it made. */
function quickstartBlock(port: number, report: QuickstartReport): string {
  const base = `http://localhost:${port}`;
  const admin = report.admin;
  const who = !admin
    ? ["  administrator  none (set PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL, _PASSWORD, _NAME)"]
    : admin.existed
      ? ["  administrator  created on an earlier start (its password was printed then)"]
      : admin.password
        ? [
            `  administrator  ${admin.email}`,
            `  password       ${admin.password}   (shown once; change it at first sign-in)`,
          ]
        : [`  administrator  ${admin.email} (the password you gave)`];
  return `${[
    "",
    "Plinth is running (Development, embedded database in ./.data/dev):",
    `  API            ${base}/api`,
    `  API docs       ${base}/api/docs`,
    `  console        ${base}/console`,
    ...who,
    "  keys           ./.data/dev/quickstart-keys.json (0600; tenant secrets, SMS pepper, JWT)",
    "  webhooks       local receivers allowed (Webhooks:AllowPrivateDestinations)",
    "  single sign-on local identity providers allowed (Sso:AllowPrivateProviders)",
    "",
  ].join("\n")}\n`;
}

/** Bun's side of the lifecycle (src/lifecycle.ts): `Bun.serve` and process signals. */
const bun: RuntimeAdapter = {
  async serve(app, deps, port) {
    const server = Bun.serve({ port, ...bunServeOptions(app, deps) });
    return {
      port: server.port ?? port,
      drain: () => server.stop(false),
      close: () => server.stop(true),
    };
  },
  onSignal(handler) {
    process.once("SIGTERM", () => handler("SIGTERM"));
    process.once("SIGINT", () => handler("SIGINT"));
  },
  exit: (code) => process.exit(code),
};

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
