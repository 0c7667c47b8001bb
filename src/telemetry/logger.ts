import type { Redactor } from "../config/redact.ts";
import { activeTraceFields } from "./otel.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";
const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  level: LogLevel;
  redactor: Redactor;
  /** Where lines go; stdout by default. Tests pass their own to read what was logged. */
  write?: (line: string) => void;
  now?: () => Date;
}

/**
 * One JSON object per line, every field passed through the redactor. Inside an active span the line
 * carries its `traceId` and `spanId`, so logs and traces join up.
 */
export function createLogger(options: LoggerOptions, base: LogFields = {}): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const now = options.now ?? (() => new Date());
  const log = (level: LogLevel, message: string, fields?: LogFields) => {
    if (rank[level] < rank[options.level]) return;
    const record = options.redactor.value({
      time: now().toISOString(),
      level,
      msg: message,
      ...activeTraceFields(),
      ...base,
      ...fields,
    });
    write(JSON.stringify(record));
  };
  return {
    debug: (message, fields) => log("debug", message, fields),
    info: (message, fields) => log("info", message, fields),
    warn: (message, fields) => log("warn", message, fields),
    error: (message, fields) => log("error", message, fields),
    child: (fields) => createLogger({ ...options, write, now }, { ...base, ...fields }),
  };
}
