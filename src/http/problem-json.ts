import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ZodError } from "zod";
import { describeDatabaseFailure } from "../db/database-failure.ts";
import { AppError, type ErrorCode, fieldErrors } from "../errors.ts";
import { problemTypePath, problemTypes } from "./problem-types.ts";

/** The HTTP status of each error code. */
export const statusOf = {
  bad_request: 400,
  validation_failed: 400,
  host_not_allowed: 400,
  unauthorized: 401,
  payment_required: 402,
  forbidden: 403,
  password_change_required: 403,
  step_up_required: 401,
  usage_limit_reached: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  unprocessable: 422,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
} as const satisfies Record<ErrorCode, ContentfulStatusCode>;

/**
 * An error raised at the HTTP edge that needs response headers of its own (`WWW-Authenticate`,
 * `Allow`); domain code throws plain `AppError`s.
 */
export class HttpError extends AppError {
  readonly headers: Record<string, string>;
  constructor(code: ErrorCode, detail: string | undefined, headers: Record<string, string>) {
    super(code, detail);
    this.headers = headers;
  }
}

/**
 * Renders an error as its `application/problem+json` response, `Retry-After` included. `type` is
 * `/api/problems/<code>`, a page describing the code (src/http/problem-types.ts).
 */
export function problemJson(c: Context, error: AppError): Response {
  const status = statusOf[error.code];
  const body = {
    // a relative reference (RFC 9457 §3.1.1): the same on every host a tenant is served on
    type: problemTypePath(error.code),
    title: problemTypes[error.code].title,
    status,
    code: error.code,
    detail: error.hasDetail ? error.message : problemTypes[error.code].title,
    // the path Hono parsed: never a second throw for a request whose URL will not parse
    instance: c.req.path,
    requestId: c.get("requestId") as string | undefined,
    ...(error.fields ? { errors: error.fields } : {}),
  };
  const headers: Record<string, string> = { "content-type": "application/problem+json" };
  if (error.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.retryAfterSeconds);
  // a security window refused: `RateLimit` names that policy (advertised in `RateLimit-Policy` by
  // the route's middleware) instead of the request limiters' states, which still had room
  if (error.rateLimit)
    headers.ratelimit = `"${error.rateLimit.policy}";r=0;t=${error.rateLimit.resetSeconds}`;
  if (error instanceof HttpError) Object.assign(headers, error.headers);
  if (error.stepUp) headers["www-authenticate"] = stepUpChallenge(error.stepUp);
  // every 401 carries a challenge (RFC 9110 §15.5.2), the sign-in and webhook refusals too: those
  // that did not set their own get the bare bearer challenge of RFC 6750 §3
  if (status === 401) headers["www-authenticate"] ??= 'Bearer realm="plinth"';
  return c.json(body, status, headers);
}

/**
 * RFC 9470 §3: the bearer challenge saying the sign-in is too old or too weak for this operation, and
 * what would do (`acr_values`, `max_age`); the client steps up (`POST /api/auth/mfa/step-up`) and retries.
 */
export function stepUpChallenge(stepUp: { acr: string; maxAgeSeconds: number }): string {
  return `Bearer realm="plinth", error="insufficient_user_authentication", error_description="A recent sign-in with a second factor is required", acr_values="${stepUp.acr}", max_age=${stepUp.maxAgeSeconds}`;
}

/** Maps anything thrown to an `AppError`; unknown errors become a bare 500 (logged, never echoed). */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof HTTPException) {
    const code = (Object.entries(statusOf).find(([, status]) => status === error.status)?.[0] ??
      "bad_request") as ErrorCode;
    return new AppError(code, error.status >= 500 ? undefined : error.message || undefined);
  }
  // a service re-validating its input: the caller sent something the route's schema let through
  if (error instanceof ZodError) {
    return new AppError("validation_failed", "The request is not valid.", { fields: fieldErrors(error) });
  }
  // the database connection was cut (a restart, a failover) or cannot be opened: the statement failed
  // at once and the next request gets a fresh connection (docs/runbooks/database-restart.md)
  if (isDatabaseOutage(error))
    return new AppError("unavailable", "The database is not reachable for the moment.", {
      retryAfterSeconds: 1,
    });
  return new AppError("internal");
}

/** A lost or unreachable database connection (src/db/database-failure.ts), not a failed statement. */
export function isDatabaseOutage(error: unknown): boolean {
  const failure = describeDatabaseFailure(error).class;
  return failure === "connection lost" || failure === "host unreachable";
}
