import type { OpenAPIHono, RouteConfig } from "@hono/zod-openapi";
import { createRoute, z } from "@hono/zod-openapi";
import { CURSOR_PATTERN } from "../pagination.ts";
import { type Access, needsCaller, takesApiKey } from "./access.ts";
import { guardOf } from "./middleware/guards.ts";
import { type HeaderName, ref } from "./openapi-components.ts";

export { headerRef, registerComponents } from "./openapi-components.ts";

/** The application/problem+json body every error has (see problem-json.ts): the one `Problem` schema. */
export const problemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    code: z.string(),
    detail: z.string(),
    instance: z.string(),
    requestId: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .openapi("Problem");

/** An error response of the document: the `Problem` schema as `application/problem+json`. */
export const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: problemSchema } },
});

/** A JSON response of the document. */
export const json = <T extends z.ZodType>(description: string, schema: T) => ({
  description,
  content: { "application/json": { schema } },
});

/** A required JSON request body. */
export const jsonBody = <T extends z.ZodType>(schema: T) => ({
  required: true,
  content: { "application/json": { schema } },
});

/** `{tenantId}` in an admin path. */
export const tenantIdParam = z.object({
  tenantId: z.string().openapi({ param: { name: "tenantId", in: "path" } }),
});

/** The page every list answers: `items`, then `nextCursor` (null on the last page) to pass as `cursor`. */
export const page = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    nextCursor: z
      .string()
      .nullable()
      .openapi({ description: "Pass as `cursor` for the next page; null on the last page." }),
  });

/** Every list's page size: one default, one maximum (docs/api-conventions.md). */
export const PAGE_LIMIT = { default: 50, max: 200 } as const;

/** `?limit=` and `?cursor=` of a paged list: the one list shape (docs/api-conventions.md). */
export const pageQuery = {
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(PAGE_LIMIT.max)
    .default(PAGE_LIMIT.default)
    .openapi({ description: `Items per page, 1–${PAGE_LIMIT.max} (default ${PAGE_LIMIT.default}).` }),
  cursor: z
    .string()
    .regex(new RegExp(CURSOR_PATTERN), "not a cursor returned by this endpoint")
    .optional()
    .openapi({
      description:
        "The previous page's `nextCursor`, as it came (opaque: base64url of a JSON position; the `next` link of the 200 answer says where it comes from). Any other value — one this list did not return, edited, another list's — is a 400 naming `cursor`.",
    }),
};

const SAFE = new Set(["get", "head", "options"]);

/** The operation's `security`: what the declared access accepts as a credential. */
function securityOf(access: Access, method: string) {
  if (!needsCaller(access)) return [];
  const cookie = SAFE.has(method) ? { sessionCookie: [] } : { sessionCookie: [], csrfToken: [] };
  return takesApiKey(access) ? [{ bearer: [] }, { apiKey: [] }, cookie] : [{ bearer: [] }, cookie];
}

/** The error answers every operation of an access can give, whatever its handler does. */
export function commonErrors(access: Access, options: { body: boolean }) {
  if (access === "probe") return {};
  const errors: Record<number, ReturnType<typeof problem>> = {
    400: problem("`validation_failed` (the `errors` name the fields), `host_not_allowed` or `bad_request`."),
    413: problem("`payload_too_large`: the body is over `Server:MaxBodyBytes`."),
    429: problem("`rate_limited`: a rate-limit policy or security window is full; see `Retry-After`."),
    500: problem("`internal`: an unexpected error (logged with the request id, never echoed)."),
    503: problem("`unavailable`: a dependency (database, cache) is unavailable; try again later."),
  };
  if (options.body) errors[415] = problem("`unsupported_media_type`: the body is not `application/json`.");
  if (access !== "public") {
    errors[401] = problem(
      "`unauthorized`: no, a malformed, an expired or a revoked token, session or API key (an API key on an admin route).",
    );
    errors[403] = problem(
      access === "platform"
        ? "`forbidden`: not a platform administrator (or a refused origin or CSRF token); `password_change_required`."
        : "`forbidden`: the caller's role (an API key: its scopes) may not do this (or a refused origin or CSRF token); `password_change_required`: change the password first.",
    );
    errors[404] = problem(
      "`not_found`: no such resource, or the token belongs to another tenant than the host's.",
    );
  }
  return errors;
}

function headersFor(access: Access, status: number, cookies: boolean, location = false) {
  const names: HeaderName[] = ["X-Request-Id"];
  if (status === 201 && location) names.push("Location");
  if (access !== "probe") names.push("RateLimit", "RateLimit-Policy");
  if (status === 401) names.push("WWW-Authenticate");
  if (status === 429 || status === 503) names.push("Retry-After");
  if (cookies) names.push("Set-Cookie");
  return Object.fromEntries(names.map((name) => [name, ref("headers", name)]));
}

function withHeaders(access: Access, responses: Record<string, object>, cookies = false, location = false) {
  return Object.fromEntries(
    Object.entries(responses).map(([status, response]) => [
      status,
      {
        ...response,
        // the route's own headers (an ETag) beside the ones every answer of its access has
        headers: {
          ...headersFor(access, Number(status), cookies, location),
          ...(response as { headers?: object }).headers,
        },
      },
    ]),
  );
}

/** The headers every answer of a signed-in operation has, on each of `responses` (a route built without `apiRoute`). */
export const withResponseHeaders = (
  responses: Record<string, object>,
  options: { location?: boolean } = {},
) => withHeaders("signedIn", responses, false, options.location);

type ApiRouteConfig = RouteConfig & { operationId: string; tags: string[]; summary: string };

/**
 * A paged list's `next` link (OpenAPI Links): the 200 answer's `nextCursor` is the same operation's
 * `cursor`, the other parameters as they were. It states, in the document, where a valid cursor
 * comes from: a client (and the contract fuzz test) takes a cursor only from a previous page.
 */
function nextPageLink(config: ApiRouteConfig) {
  const shape = (config.request?.query as { shape?: Record<string, unknown> } | undefined)?.shape;
  if (!shape || !("cursor" in shape)) return undefined;
  const parameters: Record<string, string> = { cursor: "$response.body#/nextCursor" };
  for (const name of Object.keys(shape)) if (name !== "cursor") parameters[name] = `$request.query.${name}`;
  for (const [, name] of config.path.matchAll(/\{(\w+)\}/g))
    parameters[name as string] = `$request.path.${name}`;
  return {
    next: {
      operationId: config.operationId,
      parameters,
      description:
        "The next page: this answer's `nextCursor` as `cursor`, the other parameters unchanged (none while `nextCursor` is null).",
    },
  };
}

/**
 * A route of the document with everything every operation must say, and who may call it: `access`
 * (src/http/access.ts) becomes the route's guard (its first middleware: after `authenticate`, before
 * validation), its `security`, and its row in docs/roles.md. Also the common error answers
 * (`commonErrors`), the response headers (`X-Request-Id`, the rate-limit headers, `WWW-Authenticate`
 * on 401, `Retry-After` on 429 and 503, `Set-Cookie` where `cookies`, `Location` on the 201 where `location`) and the request headers read
 * (`X-Request-Id`; `X-Tenant` under /api/auth/). The route's own responses override the common ones
 * of the same status. The handler's type is the config's own.
 */
export function apiRoute<const R extends ApiRouteConfig>(
  access: Access,
  config: R,
  options: { cookies?: boolean; location?: boolean } = {},
): R {
  const { method, path } = config;
  const body = config.request?.body !== undefined;
  const next = nextPageLink(config);
  const ok = config.responses[200] as object | undefined;
  const responses = withHeaders(
    access,
    {
      ...commonErrors(access, { body }),
      ...config.responses,
      ...(next && ok ? { 200: { ...ok, links: next } } : {}),
    },
    options.cookies,
    options.location,
  );
  const parameters = [ref("parameters", "RequestId")];
  if (path.startsWith("/api/auth/")) parameters.push(ref("parameters", "TenantCode"));
  const middleware = config.middleware === undefined ? [] : [config.middleware].flat();
  const route = createRoute({
    ...config,
    middleware: [guardOf(access), ...middleware],
    security: securityOf(access, method),
    parameters: [...parameters, ...((config.parameters as object[] | undefined) ?? [])],
    responses,
  });
  accessOfRoute.set(route, access);
  return route as unknown as R;
}

const accessOfRoute = new WeakMap<object, Access>();

/** The access a route of `apiRoute` declares. */
export function accessOf(route: ApiRouteConfig): Access | undefined {
  return accessOfRoute.get(route);
}

/** A route's path as the router matches it: `{id}` becomes `:id`. */
export const routerPath = (route: ApiRouteConfig): string => route.path.replaceAll(/\{(\w+)\}/g, ":$1");

/** The tags operations use, described once. */
export const DOCUMENT_TAGS = [
  { name: "auth", description: "Sign-in, tokens, browser sessions, SMS codes." },
  { name: "tenant", description: "A tenant's own users, domains and features (signed-in tenant users)." },
  { name: "admin", description: "Platform administration across tenants (platform administrators)." },
  { name: "billing", description: "Plans, subscriptions, features, usage, payment webhooks." },
  { name: "storage", description: "A tenant's object storage through presigned URLs." },
  { name: "tls", description: "The TLS gateway's on-demand certificate permission check." },
  {
    name: "scim",
    description: "SCIM 2.0 provisioning of a tenant's members and groups (RFC 7644), with a SCIM token.",
  },
  { name: "health", description: "Liveness and readiness probes." },
  { name: "meta", description: "This document and its reference page." },
  { name: "webhooks", description: "Events Plinth POSTs to tenants' webhook endpoints (Standard Webhooks)." },
];

/** The document itself and its reference page, as operations of the document. */
export function registerDocumentRoutes(app: Pick<OpenAPIHono, "openAPIRegistry">): void {
  const meta = {
    tags: ["meta"],
    security: [],
    parameters: [ref("parameters", "RequestId")],
  };
  const headers = headersFor("public", 200, false);
  app.openAPIRegistry.registerComponent("schemas", "OpenApiDocument", {
    type: "object",
    description: "An OpenAPI 3.1 document (https://spec.openapis.org/oas/v3.1.0).",
  });
  app.openAPIRegistry.registerComponent("schemas", "HtmlPage", {
    type: "string",
    description: "An HTML page.",
  });
  app.openAPIRegistry.registerPath({
    ...meta,
    method: "get",
    path: "/api/openapi.json",
    operationId: "getOpenApiDocument",
    summary: "This OpenAPI 3.1 document.",
    responses: {
      200: {
        description: "The document.",
        headers,
        content: { "application/json": { schema: { $ref: "#/components/schemas/OpenApiDocument" } } },
      },
      ...withHeaders("public", commonErrors("public", { body: false }), false),
    },
  });
  app.openAPIRegistry.registerComponent("schemas", "Favicon", {
    type: "string",
    description: "An SVG image.",
  });
  app.openAPIRegistry.registerPath({
    ...meta,
    method: "get",
    path: "/favicon.ico",
    operationId: "getFavicon",
    summary: "The icon of the console and the reference page (SVG).",
    responses: {
      200: {
        description: "The icon.",
        headers,
        content: { "image/svg+xml": { schema: { $ref: "#/components/schemas/Favicon" } } },
      },
      ...withHeaders("public", commonErrors("public", { body: false }), false),
    },
  });
  app.openAPIRegistry.registerComponent("schemas", "Script", {
    type: "string",
    description: "A JavaScript file of the reference page's viewer.",
  });
  const script = (description: string) => ({
    200: {
      description,
      headers,
      content: { "text/javascript": { schema: { $ref: "#/components/schemas/Script" } } },
    },
    ...withHeaders("public", commonErrors("public", { body: false }), false),
  });
  app.openAPIRegistry.registerPath({
    ...meta,
    method: "get",
    path: "/api/docs/assets/init.js",
    operationId: "getApiReferenceInit",
    summary: "The script that starts the reference viewer over this document.",
    responses: script("The script."),
  });
  app.openAPIRegistry.registerPath({
    ...meta,
    method: "get",
    path: "/api/docs/assets/{file}",
    operationId: "getApiReferenceViewer",
    summary:
      "The reference viewer's bundle (`standalone-<version>.js`, from the @scalar/api-reference package).",
    parameters: [
      ...meta.parameters,
      {
        name: "file",
        in: "path",
        required: true,
        schema: { type: "string", pattern: "^standalone-[0-9A-Za-z.+-]+\\.js$" },
      },
    ],
    responses: {
      ...script("The bundle (immutable; gzip when accepted)."),
      404: {
        description: "Not the bundle of this version.",
        headers,
        content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
      },
    },
  });
  app.openAPIRegistry.registerPath({
    ...meta,
    method: "get",
    path: "/api/docs",
    operationId: "getApiReference",
    summary: "An HTML reference page over this document.",
    responses: {
      200: {
        description: "The page.",
        headers,
        content: { "text/html": { schema: { $ref: "#/components/schemas/HtmlPage" } } },
      },
      ...withHeaders("public", commonErrors("public", { body: false }), false),
    },
  });
}
