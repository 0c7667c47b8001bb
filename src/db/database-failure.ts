/**
 * What went wrong talking to PostgreSQL, as an operator needs to read it: the class of the failure
 * (host unreachable, database missing, role missing, authentication failed, TLS, …) and the code
 * (PostgreSQL's SQLSTATE or the socket's errno name). Drizzle wraps driver errors (`Failed query:
 * …`); the cause chain is walked to find the driver's own error. Never contains the connection URL.
 */

export type DatabaseFailureClass =
  | "host unreachable"
  | "database missing"
  | "role missing"
  | "authentication failed"
  | "TLS"
  | "timed out"
  | "connection lost"
  | "query failed";

export interface DatabaseFailure {
  class: DatabaseFailureClass;
  /** SQLSTATE (`3D000`, `28P01`) or the socket error's code (`ECONNREFUSED`). */
  code?: string;
  /** PostgreSQL's or the socket's message, with any URL credentials cut out. */
  message: string;
  detail?: string;
  hint?: string;
}

interface DriverError {
  code?: unknown;
  message?: unknown;
  detail?: unknown;
  hint?: unknown;
  cause?: unknown;
}

const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "CONNECT_TIMEOUT",
]);
const LOST = new Set([
  "ECONNRESET",
  "EPIPE",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  // no byte from the server within Database:AnswerTimeoutSeconds: the connection was closed as dead
  "ANSWER_TIMEOUT",
  // the server ended the session: pg_terminate_backend or a fast shutdown, a crash, still starting
  "57P01",
  "57P02",
  "57P03",
]);

/** The innermost error that carries a code (the driver's), else the innermost error. */
export function driverError(error: unknown): DriverError {
  let current: unknown = error;
  let found: DriverError | undefined;
  for (let depth = 0; depth < 5 && current && typeof current === "object"; depth++) {
    const e = current as DriverError;
    if (typeof e.code === "string") found = e;
    current = e.cause;
  }
  return found ?? ((error && typeof error === "object" ? error : { message: String(error) }) as DriverError);
}

/** Cuts `user:password@` out of anything that looks like a URL. */
export function withoutCredentials(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*@/gi, "$1");
}

export function describeDatabaseFailure(error: unknown): DatabaseFailure {
  const e = driverError(error);
  const code = typeof e.code === "string" ? e.code : undefined;
  const message = withoutCredentials(String(e.message ?? error));
  const text = message.toLowerCase();
  let kind: DatabaseFailureClass = "query failed";
  if (code === "3D000") kind = "database missing";
  else if (code === "28000" && /role .* does not exist/.test(text)) kind = "role missing";
  else if (code === "28P01" || code === "28000") kind = "authentication failed";
  else if (/\b(tls|ssl|certificate)\b/.test(text)) kind = "TLS";
  else if (code && UNREACHABLE.has(code)) kind = "host unreachable";
  else if (code && LOST.has(code)) kind = "connection lost";
  else if (/timed out/.test(text)) kind = "timed out";
  else if (code?.startsWith("08")) kind = "connection lost";
  return {
    class: kind,
    ...(code ? { code } : {}),
    message,
    ...(typeof e.detail === "string" ? { detail: withoutCredentials(e.detail) } : {}),
    ...(typeof e.hint === "string" ? { hint: e.hint } : {}),
  };
}

/** Whether the failure means the database cannot be reached or entered (not a failed statement). */
export function isConnectionFailure(failure: DatabaseFailure): boolean {
  return failure.class !== "query failed";
}

/** `database missing (3D000)`: short enough for a readiness answer, free of names and values. */
export function failureSummary(failure: DatabaseFailure): string {
  return failure.code ? `${failure.class} (${failure.code})` : failure.class;
}

/**
 * Whether PostgreSQL aborted the statement to break a deadlock (40P01) or a serialization conflict
 * (40001): nothing of it was committed, and the same work tried again can succeed.
 */
export function isTransientConflict(error: unknown): boolean {
  const { code } = driverError(error);
  return code === "40P01" || code === "40001";
}
