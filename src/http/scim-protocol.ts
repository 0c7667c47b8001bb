import { createRoute, z } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { assertFeature } from "../billing/entitlements.ts";
import type { TenantCtx } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { ENTERPRISE_USER_SCHEMA, ERROR_SCHEMA, USER_SCHEMA } from "../scim/scim-discovery.ts";
import { ScimError } from "../scim/scim-error.ts";
import { markScimTokenUsed, openScimToken } from "../scim/scim-tokens.ts";
import { clientIp } from "./client-ip.ts";
import { withResponseHeaders } from "./openapi.ts";
import { ref } from "./openapi-components.ts";
import { HttpError, statusOf } from "./problem-json.ts";
import type { AppEnv } from "./request-context.ts";

/*
 * The SCIM protocol at the HTTP edge (docs/scim.md): its media type, its error answers, its token
 * check, and the pieces of its operations in the document (routes/scim.ts, routes/scim-groups.ts).
 */

/** The SCIM media type (RFC 7644 §3.1); requests may also send `application/json`. */
export const SCIM_MEDIA_TYPE = "application/scim+json";
export const SCIM_BASE = "/scim/v2";

const scimErrorSchema = z
  .object({
    schemas: z.array(z.string()).openapi({ description: `\`["${ERROR_SCHEMA}"]\`` }),
    status: z.string().openapi({ description: "The HTTP status, as a string (RFC 7644 §3.12)." }),
    scimType: z.string().optional(),
    detail: z.string().optional(),
  })
  .openapi("ScimError");

/** A SCIM error answer of the document. */
export const scimError = (description: string) => ({
  description,
  content: { [SCIM_MEDIA_TYPE]: { schema: scimErrorSchema } },
});

/**
 * Renders an error on a /scim/v2 path as RFC 7644 §3.12 asks (the SCIM error schema, not
 * problem+json): the status as a string, `scimType` where the error has one (a 400 the route's
 * validation or the input guard raised is `invalidValue`, naming the fields), `detail`.
 */
export function scimErrorResponse(c: Context, error: AppError): Response {
  const status = statusOf[error.code];
  const scimType =
    error instanceof ScimError
      ? error.scimType
      : error.code === "validation_failed" || error.code === "bad_request"
        ? "invalidValue"
        : undefined;
  const fields = error.fields?.map((f) => `${f.path}: ${f.message}`).join("; ");
  const body = {
    schemas: [ERROR_SCHEMA],
    status: String(status),
    ...(scimType ? { scimType } : {}),
    detail: fields ? `${error.message} ${fields}` : error.message,
  };
  const headers: Record<string, string> = { "content-type": SCIM_MEDIA_TYPE };
  if (error.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.retryAfterSeconds);
  if (error instanceof HttpError) Object.assign(headers, error.headers);
  if (status === 401) headers["www-authenticate"] ??= 'Bearer realm="plinth-scim"';
  return c.json(body, status, headers);
}

export const COMMON_ERRORS = {
  400: scimError(
    "`invalidFilter`, `invalidValue`, `invalidSyntax`, `invalidPath`, `noTarget`, `mutability`, `tooMany`.",
  ),
  401: scimError("No SCIM token, or an unknown or deleted one."),
  402: scimError("The tenant's plan no longer includes `sso`."),
  403: scimError("The request is refused (the token may not make it)."),
  413: scimError("The body is over `Server:MaxBodyBytes`."),
  429: scimError("A rate-limit policy is full; see `Retry-After`."),
  500: scimError("An unexpected error (logged with the request id)."),
  503: scimError("A dependency is unavailable; try again later."),
};

export const anyResource = z.record(z.string(), z.unknown()).openapi("ScimResource", {
  description: "A SCIM resource (RFC 7643): a User, a Group, or a discovery document.",
});
export const listResponse = z
  .object({
    schemas: z.array(z.string()),
    totalResults: z.number().int(),
    startIndex: z.number().int(),
    itemsPerPage: z.number().int(),
    Resources: z.array(anyResource),
  })
  .openapi("ScimListResponse");
export const scimBody = {
  required: true,
  content: { [SCIM_MEDIA_TYPE]: { schema: anyResource }, "application/json": { schema: anyResource } },
};
export const scimJson = (description: string, schema: z.ZodType = anyResource) => ({
  description,
  content: { [SCIM_MEDIA_TYPE]: { schema } },
});
export const projection = {
  attributes: z
    .string()
    .max(2000)
    .optional()
    .openapi({ description: "Only these attributes (comma-separated)." }),
  excludedAttributes: z
    .string()
    .max(2000)
    .optional()
    .openapi({ description: "All but these attributes (comma-separated)." }),
};
export const listQuery = z.object({
  filter: z
    .string()
    .max(2000)
    .optional()
    .openapi({ description: 'A SCIM filter: `userName eq "a@b.c"`, `emails[type eq "work"]`, `and`, `sw`…' }),
  startIndex: z.coerce
    .number()
    .int()
    .optional()
    .openapi({ description: "1-based index of the first result (default 1)." }),
  count: z.coerce
    .number()
    .int()
    .optional()
    .openapi({ description: "Results per page (default 100, at most 200)." }),
  ...projection,
});
export const idParam = z.object({
  id: z
    .string()
    .max(100)
    .openapi({ param: { name: "id", in: "path" } }),
});

type Method = "get" | "post" | "put" | "patch" | "delete";

/** A SCIM operation of the document: the SCIM token as its security, SCIM errors, the common headers. */
export function scimRoute<const P extends string, const R extends Record<string, unknown>>(
  method: Method,
  path: P,
  operationId: string,
  summary: string,
  request: R,
  responses: Record<number, object>,
) {
  return createRoute({
    method,
    path: `${SCIM_BASE}${path}` as `/scim/v2${P}`,
    operationId,
    tags: ["scim"],
    summary,
    security: [{ scimToken: [] }],
    parameters: [ref("parameters", "RequestId")],
    request,
    responses: withResponseHeaders({ ...COMMON_ERRORS, ...responses }, { location: 201 in responses }),
  } as never) as unknown as ReturnType<typeof createRoute> & { path: string; method: Method };
}

/** The base URL `meta.location` is written with: `Server:PublicBaseUrl`, else the request's origin. */
export const baseOf = (deps: Deps, c: Context): string =>
  deps.config.settings.Server.PublicBaseUrl?.replace(/\/+$/, "") ?? new URL(c.req.url).origin;

/**
 * Authenticates a /scim/v2 request by its SCIM token (`Authorization: Bearer plscim_…`): the tenant
 * is the token's, whatever the host. 401 otherwise; 402 once the tenant's plan lost `sso`.
 */
export function scimAuthenticate(deps: Deps): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const presented = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    const token = presented ? await openScimToken(deps, presented) : null;
    if (!token) throw new AppError("unauthorized", "A valid SCIM token is required.");
    const ctx = scimCtx(c, token);
    await assertFeature(deps, ctx, { feature: "sso" });
    c.set("scimToken", token);
    deps.pending.run("recording a SCIM token's last use", () => markScimTokenUsed(deps, ctx, token));
    await next();
  };
}

export function scimCtx(c: Context<AppEnv>, token: { tokenId: string; tenantId: string }): TenantCtx {
  return {
    tenantId: token.tenantId,
    actor: { type: "system", name: `scim:${token.tokenId}` },
    requestId: c.get("requestId"),
    clientRequestId: c.get("clientRequestId"),
    clientIp: clientIp(c),
    userAgent: c.req.header("user-agent")?.slice(0, 512) || undefined,
  };
}

export const ctxOf = (c: Context<AppEnv>): TenantCtx => {
  const token = c.get("scimToken");
  if (!token) throw new AppError("unauthorized");
  return scimCtx(c, token);
};

export const USER_URNS = [USER_SCHEMA, ENTERPRISE_USER_SCHEMA];
export const scimJsonResponse = (
  c: Context,
  body: unknown,
  status: 200 | 201 = 200,
  headers: Record<string, string> = {},
) => c.json(body, status, { "content-type": SCIM_MEDIA_TYPE, ...headers });
