import { REDACTED, type Redactor } from "../redact.ts";
import { nextTurn } from "../runtime/next-turn.ts";
import { activeTraceFields } from "./otel.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";
const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /**
   * The request line every response gets: the same line as `info("request", entry)` (`error` from
   * status 500 on, `debug` for a health probe that passed: `RequestLine.probe`), built without the
   * generic field walk since it is written for every request.
   */
  request(entry: RequestLine): void;
  /** Whether a line of this level is written (`Logging:Level`): work done only for one can be skipped. */
  enabled(level: LogLevel): boolean;
  child(fields: LogFields): Logger;
  /** Writes out buffered lines now (see `bufferedLines`). */
  flush(): void;
}

/** What the request line says: the path without its query, the duration in milliseconds. */
export interface RequestLine {
  method: string;
  path: string;
  status: number;
  durationMs: number;
  requestId: string;
  /** An `X-Request-Id` the client chose that was not taken as the id (src/http/middleware/request.ts). */
  clientRequestId?: string | undefined;
  /**
   * A health probe's answer (`/api/health`, `/api/health/ready`): one that passed (status below 400)
   * is logged at `debug`, not `info`. Orchestrators and load balancers ask every few seconds per
   * instance; a failing answer is logged as any other (`error` from 500). docs/decisions.md.
   */
  probe?: boolean;
}

/** The level a request line is written at (`Logger.request`). */
export function requestLevel(entry: Pick<RequestLine, "status" | "probe">): LogLevel {
  if (entry.status >= 500) return "error";
  return entry.probe === true && entry.status < 400 ? "debug" : "info";
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

/** Keys every line starts with; a field of the same name falls back to the object merge below. */
const RESERVED = new Set(["time", "level", "msg", "traceId", "spanId"]);

/**
 * One JSON object per line, every field passed through the redactor. Inside an active span the line
 * carries its `traceId` and `spanId`, so logs and traces join up.
 *
 * Lines are written on every request, so the usual record (flat fields: strings, numbers, booleans)
 * is serialised by hand, field by field, with the same redaction as `Redactor.value`: a field whose
 * name marks a secret is replaced, every string goes through `Redactor.text`. Nested values take
 * the generic walk. The timestamp string is reused within the same millisecond.
 */
export function createLogger(options: LoggerOptions, base: LogFields = {}): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const { redactor } = options;
  const baseKeys = Object.keys(base);
  // the child's own fields are serialised once, not on every line
  const baseJson = baseKeys.map((key) => member(redactor, key, base[key])).join("");
  const timestamp = options.now ? () => (options.now as () => Date)().toISOString() : cachedIsoNow();

  const log = (level: LogLevel, message: string, fields?: LogFields) => {
    if (rank[level] < rank[options.level]) return;
    const trace = activeTraceFields();
    let line = `{"time":"${timestamp()}","level":"${level}","msg":${quote(redactor.text(message))}`;
    if (trace) line += `,"traceId":"${trace.traceId}","spanId":"${trace.spanId}"`;
    if (fields) {
      let own = "";
      for (const key in fields) {
        if (!Object.hasOwn(fields, key)) continue;
        if (RESERVED.has(key) || (baseKeys.length > 0 && Object.hasOwn(base, key))) {
          write(merged(level, message, trace, fields));
          return;
        }
        own += member(redactor, key, fields[key]);
      }
      line += baseJson + own;
    } else line += baseJson;
    write(`${line}}`);
  };
  // the request line's fixed parts, redacted once (the names are not secret-looking, see the test)
  const requestMsg = quote(redactor.text("request"));
  // methods and paths repeat from request to request: each redacted and quoted once (bounded)
  const quoted = new Map<string, string>();
  const quotedRedacted = (text: string): string => {
    let json = quoted.get(text);
    if (json === undefined) {
      json = quote(redactor.text(text));
      if (quoted.size >= QUOTED_MAX) quoted.clear();
      quoted.set(text, json);
    }
    return json;
  };
  const request = (entry: RequestLine) => {
    const level = requestLevel(entry);
    if (rank[level] < rank[options.level]) return;
    // a child's own fields may shadow the entry's: the generic path keeps that rule (`probe` is
    // the line's level, not a field of it)
    if (baseKeys.length > 0) {
      const { probe: _probe, ...fields } = entry;
      return log(level, "request", fields);
    }
    const trace = activeTraceFields();
    let line = `{"time":"${timestamp()}","level":"${level}","msg":${requestMsg}`;
    if (trace) line += `,"traceId":"${trace.traceId}","spanId":"${trace.spanId}"`;
    write(
      `${line},"method":${quotedRedacted(entry.method)},"path":${quotedRedacted(entry.path)},"status":${finite(entry.status)},"durationMs":${hundredths(entry.durationMs)},"requestId":${quote(redactor.text(entry.requestId))}${entry.clientRequestId === undefined ? "" : `,"clientRequestId":${quote(redactor.text(entry.clientRequestId))}`}}`,
    );
  };
  // a field that shadows a reserved or base key: the object spread decides, as it always did
  const merged = (level: LogLevel, message: string, trace: LogFields | undefined, fields: LogFields) =>
    JSON.stringify(
      redactor.value({ time: timestamp(), level, msg: message, ...trace, ...base, ...fields }),
      jsonSafe,
    );
  return {
    debug: (message, fields) => log("debug", message, fields),
    info: (message, fields) => log("info", message, fields),
    warn: (message, fields) => log("warn", message, fields),
    error: (message, fields) => log("error", message, fields),
    request,
    enabled: (level) => rank[level] >= rank[options.level],
    child: (fields) => createLogger({ ...options, write }, { ...base, ...fields }),
    flush: () => options.flush?.(),
  };
}

/** `,"key":value` for one field, redacted exactly as `Redactor.value` would; "" for undefined. */
function member(redactor: Redactor, key: string, value: unknown): string {
  let json: string;
  if (value === undefined || typeof value === "function" || typeof value === "symbol") return "";
  if (value === null || typeof value === "boolean") json = String(value);
  else if (redactor.isSecretName(key)) json = `"${REDACTED}"`;
  else if (typeof value === "string") json = quote(redactor.text(value));
  else if (typeof value === "number") json = finite(value);
  else json = JSON.stringify(redactor.value(value), jsonSafe);
  return `${prefix(key)}${json}`;
}

/** How many distinct methods and paths a logger keeps redacted (`request`); then it starts again. */
const QUOTED_MAX = 4_096;

/** A number as JSON.stringify writes it (NaN and the infinities as null). */
const finite = (value: number): string => (Number.isFinite(value) ? String(value) : "null");

/**
 * `finite(value)` for a duration of whole hundredths (`elapsedMs`), written from integers: a double's
 * shortest form costs ~0.3 µs a line in JavaScriptCore, an integer's almost nothing. `h / 100` is the
 * double nearest the decimal `whole.frac`, so its shortest form is that decimal (below 1e12
 * hundredths, where doubles are far closer together than 0.01). Anything else goes to `finite`.
 */
function hundredths(value: number): string {
  const h = Math.round(value * 100);
  if (h / 100 !== value || h < 0 || h >= 1e12) return finite(value);
  const whole = Math.floor(h / 100);
  const frac = h - whole * 100;
  if (frac === 0) return `${whole}`;
  return frac % 10 === 0 ? `${whole}.${frac / 10}` : `${whole}.${frac < 10 ? "0" : ""}${frac}`;
}

/** Only characters JSON keeps as they are (no quote, backslash, control character, surrogate half). */
const PLAIN = /^[ !#-[\]-~\u0080-\ud7ff\ue000-\uffff]*$/;
const quote = (text: string): string => (PLAIN.test(text) ? `"${text}"` : JSON.stringify(text));

/** `,"key":` for the few field names logs repeat. */
const prefixes = new Map<string, string>();
function prefix(key: string): string {
  let out = prefixes.get(key);
  if (out === undefined) {
    out = `,${JSON.stringify(key)}:`;
    if (prefixes.size < 4096) prefixes.set(key, out);
  }
  return out;
}

/** JSON.stringify throws on a bigint; a log line must never throw. */
function jsonSafe(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}

/** `new Date().toISOString()`, computed once per millisecond. */
function cachedIsoNow(): () => string {
  let lastMs = -1;
  let last = "";
  return () => {
    const ms = Date.now();
    if (ms !== lastMs) {
      lastMs = ms;
      last = new Date(ms).toISOString();
    }
    return last;
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
        nextTurn(flush);
      }
    },
    flush,
  };
}
