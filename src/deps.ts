import { type Cache, createCache } from "./cache/index.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { AppConfig } from "./config/load.ts";
import { createRedactor, type Redactor } from "./config/redact.ts";
import { type Database, openDatabase } from "./db/client.ts";
import { createLogger, type Logger } from "./telemetry/logger.ts";

/** Everything the app, the loops and domain functions need, built once per process. */
export interface Deps {
  config: AppConfig;
  redactor: Redactor;
  logger: Logger;
  database: Database;
  cache: Cache | null;
  clock: Clock;
}

export interface CreateDepsOptions {
  /** Tests hand in their own database, clock or log sink. */
  database?: Database;
  clock?: Clock;
  logWrite?: (line: string) => void;
}

export async function createDeps(config: AppConfig, options: CreateDepsOptions = {}): Promise<Deps> {
  const redactor = createRedactor(config.secretValues);
  const logger = createLogger({ level: config.settings.Logging.Level, redactor, write: options.logWrite });
  const database =
    options.database ??
    (await openDatabase(config.database.url, {
      poolSize: config.settings.Database.PoolSize,
      applicationName: "plinth",
    }));
  const cache = config.cache
    ? createCache(config.cache.url, { environment: config.environment, logger })
    : null;
  return { config, redactor, logger, database, cache, clock: options.clock ?? systemClock };
}

export async function closeDeps(deps: Deps): Promise<void> {
  await Promise.allSettled([deps.database.close(), deps.cache?.close()]);
}
