import type { ErrorCode } from "../errors.ts";

/**
 * What each error code means to a client: the one place its title, its cause and the remedy are
 * written. `problemJson` takes the title from here; `GET /api/problems/{code}` (the problem `type`
 * of every problem+json answer) renders the page; docs/errors.md is generated from it
 * (`bun run docs:errors`, checked by tests/unit/errors-reference.test.ts).
 */
export interface ProblemType {
  title: string;
  /** When the API answers it. */
  when: string;
  /** What the client should do. */
  action: string;
}

export const problemTypes: Record<ErrorCode, ProblemType> = {
  bad_request: {
    title: "Bad request",
    when: "The request cannot be understood as sent: a body that is not JSON, a tenant code on a path that takes none, an event a source may not send.",
    action: "Fix the request as `detail` says; sending it again unchanged fails again.",
  },
  validation_failed: {
    title: "The request is not valid",
    when: "A path, query, header or body value fails the operation's schema; `errors` lists each field (`path`, `message`), never its value.",
    action: "Correct the fields named in `errors` and send again.",
  },
  host_not_allowed: {
    title: "Host not allowed",
    when: "The request's Host is not one the API serves: not in `AllowedHosts`, not a tenant's verified custom domain, or missing.",
    action: "Call the API on its own host name or on a verified custom domain of the tenant.",
  },
  unauthorized: {
    title: "Authentication required",
    when: 'No credentials, or a bearer token that is malformed, forged, expired or of an ended session (then `WWW-Authenticate` says `error="invalid_token"`), or wrong sign-in credentials.',
    action:
      "Refresh the access token (`POST /api/auth/refresh`) or sign in again; for a failed sign-in, check the credentials.",
  },
  payment_required: {
    title: "The plan does not include this",
    when: "The tenant's plan does not include the feature the operation needs.",
    action: "Change to a plan that includes the feature (see `GET /api/plans`).",
  },
  forbidden: {
    title: "Forbidden",
    when: "The caller is authenticated but may not do this: a missing role, a tenant user on a platform route, an origin not allowed for browser sessions, a missing or wrong CSRF token.",
    action:
      "Use an account with the needed role; browsers send the `X-CSRF-Token` header on state-changing requests.",
  },
  password_change_required: {
    title: "The password must be changed first",
    when: "The account must change its password before anything else (a new account or a reset by an administrator).",
    action: "Change the password with `POST /api/auth/password`, then continue.",
  },
  step_up_required: {
    title: "A recent second factor is required",
    when: 'A sensitive operation (a password change, an API key, a webhook secret rotation, enrolling or removing a factor, SSO and SCIM configuration) needs a sign-in with a second factor within the last minutes (`WWW-Authenticate: Bearer error="insufficient_user_authentication"` with `max_age` and `acr_values`, RFC 9470).',
    action:
      "Prove a second factor again with `POST /api/auth/mfa/step-up` (a fresh access token comes back), then repeat the request.",
  },
  usage_limit_reached: {
    title: "Usage limit reached",
    when: "The tenant has used all its plan allows of a metered resource (users, custom domains, storage…).",
    action: "Free some of the resource or change to a larger plan.",
  },
  not_found: {
    title: "Not found",
    when: "No such resource, or it belongs to another tenant (which looks the same on purpose).",
    action: "Check the path and the identifier; do not retry unchanged.",
  },
  method_not_allowed: {
    title: "Method not allowed",
    when: "The path exists but not with this method; the `Allow` header lists the methods it answers.",
    action: "Use one of the methods in `Allow`.",
  },
  conflict: {
    title: "Conflict",
    when: "The request conflicts with the current state: a duplicate (e-mail, tenant code, job dedup key), the last owner of a tenant, a state change that is not allowed now.",
    action: "Read the resource's current state and decide again; retrying unchanged fails again.",
  },
  unprocessable: {
    title: "Unprocessable content",
    when: "The request is well formed but what it points at cannot be used: an identity provider's issuer whose discovery fails, SAML metadata without a signing certificate or single sign-on URL. The `errors` name the field and what failed.",
    action: "Fix what the `errors` name (at the provider or in the request) and send it again.",
  },
  payload_too_large: {
    title: "Request body too large",
    when: "The body exceeds `Server:MaxBodyBytes` (or an upload exceeds its limit).",
    action: "Send a smaller body; split large uploads.",
  },
  unsupported_media_type: {
    title: "Unsupported media type",
    when: "The body's content type is not one the operation accepts (e.g. an upload of a type that is not allowed).",
    action: "Send one of the accepted content types.",
  },
  rate_limited: {
    title: "Too many requests",
    when: "A rate limit or a security window refused the request; `RateLimit` and `RateLimit-Policy` name the limit, `Retry-After` says when to try again.",
    action: "Wait `Retry-After` seconds before retrying; slow down.",
  },
  internal: {
    title: "Internal error",
    when: "An unexpected failure on the server; it is logged with the request id.",
    action: "Retry later; if it persists, report the `requestId` of the answer.",
  },
  unavailable: {
    title: "Service unavailable",
    when: "A dependency the operation needs is down or not configured (the database, its connection cut by a restart; the cache, object storage, tenant secrets, the TLS gateway).",
    action: "Retry after `Retry-After` seconds when given, otherwise later.",
  },
};

/** The `type` of a problem: a URI reference, relative to the API, that describes the code. */
export const problemTypePath = (code: ErrorCode) => `/api/problems/${code}`;
