import { createRoute, z } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { assertFeature } from "../../billing/entitlements.ts";
import type { TenantCtx } from "../../context.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import {
  ENTERPRISE_USER_SCHEMA,
  ERROR_SCHEMA,
  resourceTypes,
  schemas,
  serviceProviderConfig,
  USER_SCHEMA,
} from "../../scim/scim-discovery.ts";
import { ScimError } from "../../scim/scim-error.ts";
import { project } from "../../scim/scim-projection.ts";
import { markScimTokenUsed, openScimToken } from "../../scim/scim-tokens.ts";
import {
  createScimUser,
  deleteScimUser,
  getScimUser,
  listScimUsers,
  patchScimUser,
  replaceScimUser,
} from "../../scim/scim-users.ts";
import { clientIp } from "../client-ip.ts";
import { withResponseHeaders } from "../openapi.ts";
import { ref } from "../openapi-components.ts";
import { HttpError, statusOf } from "../problem-json.ts";
import { type AppEnv, createRouter } from "../request-context.ts";

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
const scimError = (description: string) => ({
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

const COMMON_ERRORS = {
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

const anyResource = z.record(z.string(), z.unknown()).openapi("ScimResource", {
  description: "A SCIM resource (RFC 7643): a User, a Group, or a discovery document.",
});
const listResponse = z
  .object({
    schemas: z.array(z.string()),
    totalResults: z.number().int(),
    startIndex: z.number().int(),
    itemsPerPage: z.number().int(),
    Resources: z.array(anyResource),
  })
  .openapi("ScimListResponse");
const scimBody = {
  required: true,
  content: { [SCIM_MEDIA_TYPE]: { schema: anyResource }, "application/json": { schema: anyResource } },
};
const scimJson = (description: string, schema: z.ZodType = anyResource) => ({
  description,
  content: { [SCIM_MEDIA_TYPE]: { schema } },
});
const projection = {
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
const listQuery = z.object({
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
const idParam = z.object({
  id: z
    .string()
    .max(100)
    .openapi({ param: { name: "id", in: "path" } }),
});

type Method = "get" | "post" | "put" | "patch" | "delete";

/** A SCIM operation of the document: the SCIM token as its security, SCIM errors, the common headers. */
function scimRoute<const P extends string, const R extends Record<string, unknown>>(
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
const baseOf = (deps: Deps, c: Context): string =>
  deps.config.settings.Server.PublicBaseUrl?.replace(/\/+$/, "") ?? new URL(c.req.url).origin;

/**
 * Authenticates a /scim/v2 request by its SCIM token (`Authorization: Bearer plscim_…`): the tenant
 * is the token's, whatever the host. 401 otherwise; 402 once the tenant's plan lost `sso`.
 */
function scimAuthenticate(deps: Deps): MiddlewareHandler<AppEnv> {
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

function scimCtx(c: Context<AppEnv>, token: { tokenId: string; tenantId: string }): TenantCtx {
  return {
    tenantId: token.tenantId,
    actor: { type: "system", name: `scim:${token.tokenId}` },
    requestId: c.get("requestId"),
    clientRequestId: c.get("clientRequestId"),
    clientIp: clientIp(c),
    userAgent: c.req.header("user-agent")?.slice(0, 512) || undefined,
  };
}

const ctxOf = (c: Context<AppEnv>): TenantCtx => {
  const token = c.get("scimToken");
  if (!token) throw new AppError("unauthorized");
  return scimCtx(c, token);
};

const USER_URNS = [USER_SCHEMA, ENTERPRISE_USER_SCHEMA];
const scimJsonResponse = (
  c: Context,
  body: unknown,
  status: 200 | 201 = 200,
  headers: Record<string, string> = {},
) => c.json(body, status, { "content-type": SCIM_MEDIA_TYPE, ...headers });

const routes = {
  spc: scimRoute(
    "get",
    "/ServiceProviderConfig",
    "getScimServiceProviderConfig",
    "What this SCIM service provider supports.",
    {},
    { 200: scimJson("The configuration.") },
  ),
  resourceTypes: scimRoute(
    "get",
    "/ResourceTypes",
    "listScimResourceTypes",
    "The SCIM resource types (User, Group).",
    {},
    { 200: scimJson("The resource types.", listResponse) },
  ),
  schemas: scimRoute(
    "get",
    "/Schemas",
    "listScimSchemas",
    "The SCIM schemas of the resource types.",
    {},
    { 200: scimJson("The schemas.", listResponse) },
  ),
  listUsers: scimRoute(
    "get",
    "/Users",
    "listScimUsers",
    "The tenant's members as SCIM Users, filtered and paged.",
    { query: listQuery },
    { 200: scimJson("A page of Users.", listResponse) },
  ),
  createUser: scimRoute(
    "post",
    "/Users",
    "createScimUser",
    "Provision a member (userName: the e-mail address).",
    { body: scimBody },
    { 201: scimJson("The User created."), 409: scimError("`uniqueness`: a member has this userName.") },
  ),
  getUser: scimRoute(
    "get",
    "/Users/{id}",
    "getScimUser",
    "A member as a SCIM User.",
    { params: idParam, query: z.object(projection) },
    { 200: scimJson("The User."), 404: scimError("No such User in this tenant.") },
  ),
  replaceUser: scimRoute(
    "put",
    "/Users/{id}",
    "replaceScimUser",
    "Replace a member's attributes; `active: false` ends the member's sessions.",
    { params: idParam, body: scimBody },
    {
      200: scimJson("The User."),
      404: scimError("No such User in this tenant."),
      409: scimError("`uniqueness`, or the tenant's last owner."),
    },
  ),
  patchUser: scimRoute(
    "patch",
    "/Users/{id}",
    "patchScimUser",
    "Patch a member (add, replace, remove; the forms Okta and Entra ID send).",
    { params: idParam, body: scimBody },
    {
      200: scimJson("The User."),
      404: scimError("No such User in this tenant."),
      409: scimError("`uniqueness`, or the tenant's last owner."),
    },
  ),
  deleteUser: scimRoute(
    "delete",
    "/Users/{id}",
    "deleteScimUser",
    "Remove a member from the tenant; its sessions end at once.",
    { params: idParam },
    {
      204: { description: "Removed." },
      404: scimError("No such User in this tenant."),
      409: scimError("The tenant's last owner."),
    },
  ),
};

/** The SCIM 2.0 service provider of every tenant (docs/scim.md), its tenant the token's. */
export function scimRoutes(deps: Deps) {
  const router = createRouter();
  router.use(`${SCIM_BASE}/*`, scimAuthenticate(deps));
  const body = async (c: Context) => (await c.req.json()) as unknown;
  return router
    .openapi(routes.spc, (c) => scimJsonResponse(c, serviceProviderConfig(baseOf(deps, c))))
    .openapi(routes.resourceTypes, (c) => {
      const all = resourceTypes(baseOf(deps, c));
      return scimJsonResponse(c, {
        schemas: ["urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        totalResults: all.length,
        startIndex: 1,
        itemsPerPage: all.length,
        Resources: all,
      });
    })
    .openapi(routes.schemas, (c) => {
      const all = schemas(baseOf(deps, c));
      return scimJsonResponse(c, {
        schemas: ["urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        totalResults: all.length,
        startIndex: 1,
        itemsPerPage: all.length,
        Resources: all,
      });
    })
    .openapi(routes.listUsers, async (c) => {
      const query = c.req.valid("query" as never) as z.infer<typeof listQuery>;
      const page = await listScimUsers(deps, ctxOf(c), { ...query, base: baseOf(deps, c) });
      return scimJsonResponse(c, {
        ...page,
        Resources: page.Resources.map((r) => project(r, query, USER_URNS)),
      });
    })
    .openapi(routes.createUser, async (c) => {
      const user = await createScimUser(deps, ctxOf(c), { body: await body(c), base: baseOf(deps, c) });
      return scimJsonResponse(c, user, 201, {
        location: String((user.meta as { location: string }).location),
      });
    })
    .openapi(routes.getUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      const query = c.req.valid("query" as never) as z.infer<typeof listQuery>;
      return scimJsonResponse(
        c,
        project(await getScimUser(deps, ctxOf(c), { id, base: baseOf(deps, c) }), query, USER_URNS),
      );
    })
    .openapi(routes.replaceUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      return scimJsonResponse(
        c,
        await replaceScimUser(deps, ctxOf(c), { id, body: await body(c), base: baseOf(deps, c) }),
      );
    })
    .openapi(routes.patchUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      return scimJsonResponse(
        c,
        await patchScimUser(deps, ctxOf(c), { id, body: await body(c), base: baseOf(deps, c) }),
      );
    })
    .openapi(routes.deleteUser, async (c) => {
      const { id } = c.req.valid("param" as never) as { id: string };
      await deleteScimUser(deps, ctxOf(c), { id });
      return c.body(null, 204);
    });
}
