import type { ZodError } from "zod";

/**
 * Every error code Plinth answers with; clients may rely on them. Domain code throws `AppError`
 * with one of these; each transport maps it (HTTP: src/http/problem-json.ts gives the status and the
 * `application/problem+json` body).
 */
export const errorCodes = [
  "bad_request",
  "validation_failed",
  "host_not_allowed",
  "unauthorized",
  "payment_required",
  "forbidden",
  "password_change_required",
  "step_up_required",
  "usage_limit_reached",
  "not_found",
  "method_not_allowed",
  "conflict",
  "unprocessable",
  "payload_too_large",
  "unsupported_media_type",
  "rate_limited",
  "internal",
  "unavailable",
] as const;
export type ErrorCode = (typeof errorCodes)[number];

/** One field that failed validation: its dotted path and what is wrong (never its value). */
export interface FieldError {
  path: string;
  message: string;
}

/** Which rate-limit policy refused, and for how long. */
export interface RateLimitRefusal {
  policy: string;
  resetSeconds: number;
}

/** What a step-up asks for: a second factor (`acr`) proved at most `maxAgeSeconds` ago. */
export interface StepUp {
  acr: string;
  maxAgeSeconds: number;
}

/** The one typed error of the application: a code, a detail safe to show, and what the code needs. */
export class AppError extends Error {
  override name = "AppError";
  readonly code: ErrorCode;
  /** The fields that failed validation (`validation_failed`). */
  readonly fields?: FieldError[];
  /** When the caller may try again (`rate_limited`, `unavailable`). */
  readonly retryAfterSeconds?: number;
  /**
   * `rate_limited`: the advertised rate-limit policy that refused (a security window) and the
   * seconds until it accepts again; the transport names it (HTTP: the `RateLimit` header).
   */
  readonly rateLimit?: RateLimitRefusal;
  /**
   * `step_up_required`: the sign-in must be at most this many seconds old and with a second factor
   * (the transport states it: HTTP `WWW-Authenticate` with `max_age` and `acr_values`, RFC 9470).
   */
  readonly stepUp?: StepUp;
  /** Whether a detail was given; otherwise the transport shows the code's title. */
  readonly hasDetail: boolean;

  constructor(
    code: ErrorCode,
    detail?: string,
    options: {
      fields?: FieldError[];
      retryAfterSeconds?: number;
      rateLimit?: RateLimitRefusal;
      stepUp?: StepUp;
    } = {},
  ) {
    super(detail ?? code);
    this.code = code;
    this.hasDetail = detail !== undefined;
    this.fields = options.fields;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.rateLimit = options.rateLimit;
    this.stepUp = options.stepUp;
  }
}

export function fieldErrors(error: ZodError): FieldError[] {
  return error.issues.map((issue) => ({
    path: issue.path.map(String).join(".") || "(body)",
    message: issue.message,
  }));
}

/** A 400 naming the fields a schema refused (a domain function re-validating its input). */
export function validationFailed(fields: FieldError[]): AppError {
  return new AppError("validation_failed", "The request is not valid.", { fields });
}
