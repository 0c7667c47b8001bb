import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ZodError } from "zod";

/** Every problem code Plinth answers with; clients may rely on them. */
export const problemCodes = {
  bad_request: 400,
  validation_failed: 400,
  host_not_allowed: 400,
  unauthorized: 401,
  payment_required: 402,
  forbidden: 403,
  password_change_required: 403,
  usage_limit_reached: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
} as const satisfies Record<string, ContentfulStatusCode>;
export type ProblemCode = keyof typeof problemCodes;

const titles: Record<ProblemCode, string> = {
  bad_request: "Bad request",
  validation_failed: "The request is not valid",
  host_not_allowed: "Host not allowed",
  unauthorized: "Authentication required",
  payment_required: "The plan does not include this",
  forbidden: "Forbidden",
  password_change_required: "The password must be changed first",
  usage_limit_reached: "Usage limit reached",
  not_found: "Not found",
  method_not_allowed: "Method not allowed",
  conflict: "Conflict",
  payload_too_large: "Request body too large",
  unsupported_media_type: "Unsupported media type",
  rate_limited: "Too many requests",
  internal: "Internal error",
  unavailable: "Service unavailable",
};

export interface FieldError {
  path: string;
  message: string;
}

/** A typed error domain code throws; the edge turns it into application/problem+json. */
export class ProblemError extends Error {
  override name = "ProblemError";
  readonly code: ProblemCode;
  readonly status: ContentfulStatusCode;
  readonly errors?: FieldError[];
  readonly headers?: Record<string, string>;

  constructor(
    code: ProblemCode,
    detail?: string,
    options: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail ?? titles[code]);
    this.code = code;
    this.status = problemCodes[code];
    this.errors = options.errors;
    this.headers = options.headers;
  }
}

export function fieldErrors(error: ZodError): FieldError[] {
  return error.issues.map((issue) => ({
    path: issue.path.map(String).join(".") || "(body)",
    message: issue.message,
  }));
}

export function problemResponse(c: Context, problem: ProblemError): Response {
  const body = {
    type: `urn:plinth:problem:${problem.code}`,
    title: titles[problem.code],
    status: problem.status,
    code: problem.code,
    detail: problem.message,
    instance: new URL(c.req.url).pathname,
    requestId: c.get("requestId") as string | undefined,
    ...(problem.errors ? { errors: problem.errors } : {}),
  };
  const response = c.json(body, problem.status, {
    "content-type": "application/problem+json",
    ...problem.headers,
  });
  return response;
}

/** Maps anything thrown to a problem; unknown errors become a bare 500 (logged, never echoed). */
export function toProblem(error: unknown): ProblemError {
  if (error instanceof ProblemError) return error;
  if (error instanceof HTTPException) {
    const code = (Object.entries(problemCodes).find(([, status]) => status === error.status)?.[0] ??
      "bad_request") as ProblemCode;
    return new ProblemError(code, error.status >= 500 ? undefined : error.message || undefined);
  }
  // a service re-validating its input: the caller sent something the route's schema let through
  if (error instanceof ZodError) {
    return new ProblemError("validation_failed", "The request is not valid.", { errors: fieldErrors(error) });
  }
  return new ProblemError("internal");
}
