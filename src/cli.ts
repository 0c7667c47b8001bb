import { ConfigError } from "./config/config-error.ts";
import { type AppConfig, type LoadOptions, loadConfig } from "./config/load.ts";
import { type Database, openDatabase } from "./db/client.ts";
import { createRedactor, type Redactor } from "./redact.ts";
import { createLogger, type Logger } from "./telemetry/logger.ts";

export interface CliContext {
  config: AppConfig;
  redactor: Redactor;
  logger: Logger;
}

/**
 * Configuration and a redacting logger for a command-line entry point. Invalid configuration is
 * printed (keys, never values) to stderr and yields null: the caller exits 1.
 */
export function loadCliContext(processName: string, options: LoadOptions = {}): CliContext | null {
  let config: AppConfig;
  try {
    config = loadConfig(options);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return null;
    }
    throw error;
  }
  const redactor = createRedactor(config.secretValues);
  const logger = createLogger({ level: config.settings.Logging.Level, redactor }, { process: processName });
  for (const warning of config.warnings)
    logger.warn(`configuration: ${warning.key} ${warning.problem}`, { environment: config.environment });
  return { config, redactor, logger };
}

/**
 * Runs a command's work on a small pool of its own (behind a transaction pooler: unnamed
 * statements; the commands need no session state) and closes it. A failure is logged redacted, by
 * the driver's cause (a failed query's message lists its parameters), as `<what> failed`, and
 * yields `failureCode`.
 */
export async function withCliDatabase(
  context: CliContext,
  what: { name: string; failed: string; failureCode: number },
  work: (database: Database) => Promise<number>,
): Promise<number> {
  const { config, redactor, logger } = context;
  let database: Database | undefined;
  try {
    database = await openDatabase(config.database.url, {
      poolSize: 2,
      applicationName: `plinth-${what.name}`,
      poolMode: config.database.poolMode,
    });
    return await work(database);
  } catch (error) {
    const cause = (error as { cause?: unknown }).cause;
    const message = cause instanceof Error ? cause.message : (error as Error).message;
    logger.error(what.failed, { error: redactor.text(String(message ?? error)) });
    return what.failureCode;
  } finally {
    await database?.close();
  }
}
