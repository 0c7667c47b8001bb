import { parseArgs } from "node:util";
import { createApp } from "./app.ts";
import { ConfigError } from "./config/errors.ts";
import { type AppConfig, loadConfig } from "./config/load.ts";
import { closeDeps, createDeps, type Deps } from "./deps.ts";
import { bunServeOptions } from "./http/bun-serve.ts";
import { startApiBackground } from "./loops/api-background.ts";
import { runMigrator } from "./migrate.ts";

const HELP = `Usage: bun run start [--migrate] [--embedded]

Serves the Plinth API on Server:Port (or PORT; default 8080).

  --migrate   Apply migrations, seed the catalog and (outside Production) bootstrap the first
              administrator before serving. With embedded PGlite this is the only way, since a
              PGlite directory is open in one process at a time.
  --embedded  With no database configured (Development), use embedded PGlite in ./.data/dev
              instead of PostgreSQL on localhost.
  --help      Show this help.

Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT); 1 on invalid configuration or a failed start.
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

  // handlers from the start, so no signal falls in a gap between serving and being able to drain;
  // before the server serves there is nothing to drain and a signal ends the process as before
  let serving = false;
  const signalled = new Promise<string>((resolve) => {
    const on = (signal: "SIGTERM" | "SIGINT") => () => {
      if (!serving) process.exit(signal === "SIGTERM" ? 143 : 130);
      resolve(signal);
    };
    process.once("SIGTERM", on("SIGTERM"));
    process.once("SIGINT", on("SIGINT"));
  });

  let config: AppConfig;
  try {
    config = loadConfig({ embeddedFallback: flags.embedded });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    throw error;
  }

  let deps: Deps;
  try {
    deps = await createDeps(config);
  } catch (error) {
    process.stderr.write(`Start-up failed: ${createSafeMessage(config, error)}\n`);
    return 1;
  }
  const { logger } = deps;
  if (config.database.embedded) {
    logger.warn("using embedded PGlite: for development only", { database: config.database.source });
  }
  if (flags.migrate) {
    const code = await runMigrator(
      config,
      deps.database,
      { bootstrap: false, down: false, status: false },
      logger,
    ).catch((error: unknown) => {
      logger.error("migration failed", { error: (error as Error).message });
      return 1;
    });
    if (code !== 0) {
      await closeDeps(deps);
      return code;
    }
  }

  // connecting never aborts start-up; give the cache a moment so the first requests find it ready
  if (deps.cache && !(await deps.cache.waitReady(2_000)))
    logger.warn("cache not reachable yet; serving anyway, readiness reports it until it is back");

  const app = createApp(deps);
  serving = true;
  const server = Bun.serve({ port: config.settings.Server.Port, ...bunServeOptions(app, deps) });
  logger.info("listening", {
    port: server.port,
    environment: config.environment,
    database: { driver: deps.database.driver, source: config.database.source },
    cache: config.cache ? { source: config.cache.source } : null,
  });

  // after the server listens; LISTEN failing only costs wake-ups, the loops keep polling
  const background = startApiBackground(deps).catch((error: unknown) => {
    logger.error("background loops failed to start", { error });
    return null;
  });

  const signal = await signalled;
  const timeoutMs = config.settings.Server.ShutdownTimeoutSeconds * 1000;
  // one deadline for the whole drain: requests, background loops and started sends together
  const deadline = Date.now() + timeoutMs;
  logger.info("shutting down", { signal, timeoutMs });
  // stop claiming at once; running jobs share the same deadline as in-flight requests, then are released
  const backgroundStopped = background.then((b) => b?.stop(timeoutMs));
  const drained = server.stop(false);
  const timedOut = await Promise.race([
    drained.then(() => false),
    new Promise<boolean>((r) => setTimeout(() => r(true), timeoutMs)),
  ]);
  if (timedOut) {
    logger.warn("shutdown timeout: closing remaining connections");
    await server.stop(true);
  }
  await backgroundStopped;
  // work requests started without waiting (SMS sends) finishes before the database closes
  if (!(await deps.pending.settled(Math.max(0, deadline - Date.now())))) {
    logger.warn("shutdown timeout: background sends still running", { pending: deps.pending.size });
  }
  await closeDeps(deps);
  logger.info("stopped");
  logger.flush();
  return 0;
}

function createSafeMessage(config: AppConfig, error: unknown): string {
  let message = error instanceof Error ? error.message : String(error);
  for (const secret of config.secretValues)
    if (secret.length >= 4) message = message.split(secret).join("[REDACTED]");
  return message;
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
