import type { OpenAPIHono } from "@hono/zod-openapi";

/**
 * The document's shared components: the response headers, the request parameters and the
 * security schemes every route refers to by `$ref` (apiRoute in openapi.ts adds the references).
 */

export const ref = (kind: "headers" | "parameters", name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});

/** A reference to one of the document's response headers (`HEADERS`), for a route's own `headers`. */
export const headerRef = (name: HeaderName) => ref("headers", name);

export const HEADERS = {
  "X-Request-Id": {
    description:
      "The request's id: a trusted proxy's well-formed `X-Request-Id`, else a new one (a client's own is logged apart, never echoed); in the log line and in a problem's `requestId`.",
    required: true,
    schema: { type: "string" as const },
  },
  RateLimit: {
    description:
      'The policies\' state, `"<policy>";r=<left>;t=<seconds to reset>` (draft-ietf-httpapi-ratelimit-headers).',
    schema: { type: "string" as const },
  },
  "RateLimit-Policy": {
    description: 'The rate-limit policies that apply, `"<policy>";q=<quota>;w=<window seconds>`.',
    schema: { type: "string" as const },
  },
  "Retry-After": {
    description: "Seconds to wait before trying again.",
    schema: { type: "integer" as const, minimum: 0 },
  },
  "WWW-Authenticate": {
    description: 'The bearer challenge of RFC 6750, e.g. `Bearer realm="plinth"`.',
    schema: { type: "string" as const },
  },
  Allow: { description: "The methods the resource answers.", schema: { type: "string" as const } },
  Location: {
    description: "The created resource's path (relative to this API's base URL).",
    required: true,
    schema: { type: "string" as const },
  },
  ETag: {
    description:
      "The representation's strong entity tag; send it back as `If-None-Match` to revalidate (304).",
    required: true,
    schema: { type: "string" as const, pattern: '^"[A-Za-z0-9_-]{1,64}"$' },
  },
  "Cache-Control": {
    description: "How long a client or shared cache may keep the answer (`public, max-age=<seconds>`).",
    required: true,
    schema: { type: "string" as const, pattern: "^public, max-age=[0-9]+$" },
  },
  "Set-Cookie": {
    description:
      "The browser session cookie `__Host-plinth_session` (HttpOnly, Secure, path /), set or cleared.",
    schema: { type: "string" as const },
  },
};
export type HeaderName = keyof typeof HEADERS;

const PARAMETERS = {
  RequestId: {
    name: "X-Request-Id",
    in: "header" as const,
    required: false,
    description:
      "The request id a trusted proxy (`Tenancy:Resolution:TrustedProxies`) assigned (`[A-Za-z0-9._:-]{1,128}`): it becomes the request's id. From any other peer it is logged as `clientRequestId` and the request gets a new id.",
    schema: { type: "string" as const, pattern: "^[A-Za-z0-9._:-]{1,128}$" },
  },
  TenantCode: {
    name: "X-Tenant",
    in: "header" as const,
    required: false,
    description:
      "Tenant code, on the platform host only, under `Tenancy:Resolution:TenantCodePaths` (default `/api/auth/`); refused elsewhere with 400. `?tenant=` does the same.",
    schema: { type: "string" as const, maxLength: 64 },
  },
};

/** The security schemes, headers and parameters the routes refer to; `createApp` registers them once. */
export function registerComponents(app: Pick<OpenAPIHono, "openAPIRegistry">): void {
  const registry = app.openAPIRegistry;
  registry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description: "An access token from `/api/auth/login`, `/api/auth/refresh` or `/api/auth/sms/verify`.",
  });
  registry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "plk_",
    description:
      "A tenant API key (`Authorization: Bearer plk_…`, docs/api-keys.md), on the tenant routes its scopes allow.",
  });
  registry.registerComponent("securitySchemes", "scimToken", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "plscim_",
    description: "A tenant's SCIM token (`POST /api/tenant/scim/tokens`, docs/scim.md), on /scim/v2 only.",
  });
  registry.registerComponent("securitySchemes", "sessionCookie", {
    type: "apiKey",
    in: "cookie",
    name: "__Host-plinth_session",
    description:
      "The browser session from `/api/auth/browser/login` (only from `BrowserAuth:AllowedOrigins`).",
  });
  registry.registerComponent("securitySchemes", "csrfToken", {
    type: "apiKey",
    in: "header",
    name: "x-csrf-token",
    description:
      "The `csrfToken` of the browser sign-in, required with the cookie on POST, PUT, PATCH and DELETE.",
  });
  for (const [name, header] of Object.entries(HEADERS)) registry.registerComponent("headers", name, header);
  for (const [name, parameter] of Object.entries(PARAMETERS))
    registry.registerComponent("parameters", name, parameter);
}
