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
  /** Writes out buffered lines now (see `bufferedLines`). */
  flush(): void;
}

export interface LoggerOptions {
  level: LogLevel;
  redactor: Redactor;
  /** Where lines go; stdout, line by line, by default. Tests pass their own to read what was logged. */
  write?: (line: string) => void;
  /** Lines buffered by `bufferedLines`: flushed on shutdown. */
  flush?: () => void;
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
    flush: () => options.flush?.(),
  };
}

/**
 * Lines gathered during one turn of the event loop and written as one chunk: a busy server makes
 * one write per turn instead of one per request. Flushed when the buffer fills, at the end of the
 * turn, and at process exit (the server also flushes on shutdown).
 */
export function bufferedLines(
  out: (chunk: string) => void = (chunk) => process.stdout.write(chunk),
  maxLines = 256,
): { write: (line: string) => void; flush: () => void } {
  let lines: string[] = [];
  let scheduled = false;
  const defer = typeof setImmediate === "function" ? setImmediate : (fn: () => void) => setTimeout(fn, 0);
  const flush = () => {
    scheduled = false;
    if (lines.length === 0) return;
    const chunk = `${lines.join("\n")}\n`;
    lines = [];
    out(chunk);
  };
  process.once("exit", flush);
  return {
    write: (line) => {
      lines.push(line);
      if (lines.length >= maxLines) flush();
      else if (!scheduled) {
        scheduled = true;
        defer(flush);
      }
    },
    flush,
  };
}
