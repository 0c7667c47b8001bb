import { ConfigError } from "./config/errors.ts";
import { type AppConfig, type LoadOptions, loadConfig } from "./config/load.ts";
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
