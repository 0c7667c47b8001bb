import { z } from "@hono/zod-openapi";
import { checkCustomDomain } from "../../custom-domains/check-custom-domain.ts";
import { createCustomDomain } from "../../custom-domains/create-custom-domain.ts";
import { deleteCustomDomain } from "../../custom-domains/delete-custom-domain.ts";
import { getCustomDomain } from "../../custom-domains/get-custom-domain.ts";
import { getTlsPermission } from "../../custom-domains/get-tls-permission.ts";
import { listCustomDomains } from "../../custom-domains/list-custom-domains.ts";
import type { Deps } from "../../deps.ts";
import { type Access, tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { STAFF_ROLES } from "../console/layout.ts";
import { domainPages } from "../console/pages-domains.ts";
import { apiRoute, json, jsonBody, page, pageQuery, problem, tenantIdParam } from "../openapi.ts";
import { adminCtxOf, anonymousCtxOf, createRouter, tenantCtxOf } from "../request-context.ts";
import { CUSTOM_DOMAINS_ACTIONS } from "./custom-domains-actions.ts";

const domainSchema = z
  .object({
    id: z.uuid(),
    tenantId: z.uuid(),
    hostname: z.string(),
    status: z.enum(["Pending", "Failed", "Active"]),
    verification: z.object({
      type: z.literal("TXT"),
      name: z
        .string()
        .openapi({ description: "The TXT record name: `<VerificationRecordPrefix>.<hostname>`." }),
      value: z.string().openapi({ description: "The value the TXT record must hold." }),
    }),
    cnameTargets: z.array(z.string()).openapi({ description: "Point the hostname's CNAME at one of these." }),
    cnameTarget: z.string().nullable().openapi({ description: "The CNAME target seen at the last check." }),
    tls: z.object({
      gatewayHostnameId: z.string().nullable(),
      hostnameStatus: z.string().nullable().openapi({ description: "The gateway's `status`." }),
      certificateStatus: z.string().nullable().openapi({
        description: "The gateway's `ssl.status`: DNS success alone does not mean TLS is ready.",
      }),
    }),
    lastFailure: z
      .object({ code: z.string(), reason: z.string() })
      .nullable()
      .openapi({ description: "Why the last check failed (codes in docs/domains.md)." }),
    lastCheckedAt: z.string().nullable(),
    nextCheckAt: z.string().nullable(),
    checkAttempts: z.number().int(),
    activatedAt: z.string().nullable(),
    expiresAt: z.string().nullable().openapi({
      description:
        "When a Pending or Failed claim is removed (`TenantDomains:ClaimExpiryDays` after it was made); null while Active.",
    }),
    deactivatedAt: z.string().nullable().openapi({
      description:
        "When this Active domain lost the name to a tenant that proved ownership with its own TXT record.",
    }),
    createdAt: z.string(),
  })
  .openapi("TenantDomain");
const domainList = page(domainSchema).openapi("TenantDomainList");
/** A DNS name: LDH labels of 1–63 characters, at least two of them, one trailing dot allowed. */
// the last label is not all digits nor 0x…: such a name is an IP address to a URL parser (WHATWG)
export const HOSTNAME_PATTERN =
  /^(?=.{1,253}\.?$)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+(?![0-9]+\.?$)(?!0[xX])[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?$/;

const newDomain = z
  .object({
    // the pattern is declared for clients; the server's parser names the precise reason (hostname-policy.ts)
    hostname: z.string().min(1).max(300).openapi({
      pattern: HOSTNAME_PATTERN.source,
      example: "app.customer.example",
      description:
        "A DNS name in any ASCII case, one trailing dot allowed; answered in its canonical form (lower case, no trailing dot). IDNs as `xn--` labels. Refused with 400 naming `hostname`: internal names (`localhost`, `.local`, `.internal`, …), `TenantDomains:DeniedSuffixes`, the platform host and its subdomains, IP addresses and their wildcard-DNS encodings, mixed-script labels.",
    }),
  })
  .openapi("NewTenantDomain");
const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });

/** The five domain routes under `base`, for admins or tenant owners; `access` says who reads, who changes. */
function routes<P extends z.ZodRawShape>(
  base: string,
  tag: string,
  params: z.ZodObject<P>,
  access: { read: Access; write: Access },
) {
  const withId = params.extend(idParam.shape);
  return {
    create: apiRoute(
      access.write,
      {
        method: "post",
        path: base,
        operationId: `${tag === "admin" ? "admin" : "tenant"}CreateDomain`,
        tags: [tag],
        summary: "Add a custom domain: answers the TXT record and CNAME targets to set.",
        request: { params, body: jsonBody(newDomain) },
        responses: {
          201: json("Added, Pending until the records are verified.", domainSchema),
          400: problem("The hostname is not valid."),
          404: problem("No such tenant."),
          409: problem(
            "This tenant has already added this hostname (other tenants' claims are never revealed).",
          ),
          ...(tag === "tenant"
            ? {
                402: problem("`payment_required`: the tenant's plan has no custom domains."),
                403: problem("`usage_limit_reached`: the plan's custom domain limit is reached."),
              }
            : {}),
        },
      },
      { location: true },
    ),
    list: apiRoute(access.read, {
      method: "get",
      path: base,
      operationId: `${tag === "admin" ? "admin" : "tenant"}ListDomains`,
      tags: [tag],
      summary: "List the tenant's custom domains, newest first, a page at a time.",
      request: { params, query: z.object(pageQuery) },
      responses: { 200: json("The domains.", domainList), 404: problem("No such tenant.") },
    }),
    show: apiRoute(access.read, {
      method: "get",
      path: `${base}/{id}`,
      operationId: `${tag === "admin" ? "admin" : "tenant"}GetDomain`,
      tags: [tag],
      summary: "Show a custom domain: status, last failure, TLS status.",
      request: { params: withId },
      responses: { 200: json("The domain.", domainSchema), 404: problem("No such domain.") },
    }),
    check: apiRoute(access.write, {
      method: "post",
      path: `${base}/{id}/check`,
      operationId: `${tag === "admin" ? "admin" : "tenant"}CheckDomain`,
      tags: [tag],
      summary: "Re-check the domain at the loop's next tick, whatever its backoff.",
      request: { params: withId },
      responses: { 202: json("Due at the next tick.", domainSchema), 404: problem("No such domain.") },
    }),
    remove: apiRoute(access.write, {
      method: "delete",
      path: `${base}/{id}`,
      operationId: `${tag === "admin" ? "admin" : "tenant"}RemoveDomain`,
      tags: [tag],
      summary: "Remove the domain, from the TLS gateway too.",
      request: { params: withId },
      responses: {
        204: { description: "Removed." },
        404: problem("No such domain."),
        503: problem("The gateway did not confirm the removal; nothing was removed."),
      },
    }),
  };
}

const admin = routes("/api/admin/tenants/{tenantId}/domains", "admin", tenantIdParam, {
  read: "platform",
  write: "platform",
});
const tenant = routes("/api/tenant/domains", "tenant", z.object({}), {
  read: tenantAccess(["owner", "admin"], { apiKey: "domains:read" }),
  write: tenantAccess(["owner", "admin"], { apiKey: "domains:write" }),
});

/** Platform admin: any tenant's domains. Each declares `platform` access. */
export function adminDomainRoutes(deps: Deps) {
  return (
    createRouter()
      // operators act for the platform: the tenant's plan does not block them (usage still counts)
      .openapi(admin.create, async (c) => {
        const { tenantId } = c.req.valid("param");
        const input = { hostname: c.req.valid("json").hostname, forPlatform: true };
        const domain = await createCustomDomain(deps, adminCtxOf(c, tenantId), input);
        return c.json(domain, 201, { location: `/api/admin/tenants/${tenantId}/domains/${domain.id}` });
      })
      .openapi(admin.list, async (c) => {
        const ctx = adminCtxOf(c, c.req.valid("param").tenantId);
        return c.json(await listCustomDomains(deps, ctx, c.req.valid("query")), 200);
      })
      .openapi(admin.show, async (c) => {
        const { tenantId, id } = c.req.valid("param");
        return c.json(await getCustomDomain(deps, adminCtxOf(c, tenantId), { id }), 200);
      })
      .openapi(admin.check, async (c) => {
        const { tenantId, id } = c.req.valid("param");
        return c.json(await checkCustomDomain(deps, adminCtxOf(c, tenantId), { id }), 202);
      })
      .openapi(admin.remove, async (c) => {
        const { tenantId, id } = c.req.valid("param");
        await deleteCustomDomain(deps, adminCtxOf(c, tenantId), { id });
        return c.body(null, 204);
      })
  );
}

/**
 * Tenant owners and admins: their own tenant's domains (every query scoped by the principal's tenant, so
 * another tenant's domain id is a 404).
 */
export function tenantDomainRoutes(deps: Deps) {
  return createRouter()
    .openapi(tenant.create, async (c) => {
      // the plan binds a tenant's own additions: never `forPlatform` from here
      const { hostname } = c.req.valid("json");
      const domain = await createCustomDomain(deps, tenantCtxOf(c), { hostname });
      return c.json(domain, 201, { location: `/api/tenant/domains/${domain.id}` });
    })
    .openapi(tenant.list, async (c) => {
      return c.json(await listCustomDomains(deps, tenantCtxOf(c), c.req.valid("query")), 200);
    })
    .openapi(tenant.show, async (c) =>
      c.json(await getCustomDomain(deps, tenantCtxOf(c), { id: c.req.valid("param").id }), 200),
    )
    .openapi(tenant.check, async (c) =>
      c.json(await checkCustomDomain(deps, tenantCtxOf(c), { id: c.req.valid("param").id }), 202),
    )
    .openapi(tenant.remove, async (c) => {
      await deleteCustomDomain(deps, tenantCtxOf(c), { id: c.req.valid("param").id });
      return c.body(null, 204);
    });
}

const permission = apiRoute("public", {
  method: "get",
  path: "/api/tls/permission",
  operationId: "getTlsPermission",
  tags: ["tls"],
  summary:
    "On-demand TLS permission for a Caddy-style edge: 200 only for Active domains and the platform host.",
  request: { query: z.object({ domain: z.string().min(1).max(300) }) },
  responses: {
    200: json(
      "A certificate may be issued for this name.",
      z.object({ domain: z.string(), allowed: z.literal(true) }).openapi("TlsPermission"),
    ),
    404: problem("Not a name served here."),
  },
});

/** Public, and exempt from the host allowlist (the edge calls by IP). Answers from an in-process cache. */
export function tlsPermissionRoutes(deps: Deps) {
  return createRouter().openapi(permission, async (c) =>
    c.json(
      await getTlsPermission(deps, anonymousCtxOf(c, null), { domain: c.req.valid("query").domain }),
      200,
    ),
  );
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const customDomainsArea = defineArea({
  name: "custom-domains",
  routes: [adminDomainRoutes, tenantDomainRoutes, tlsPermissionRoutes],
  auditActions: CUSTOM_DOMAINS_ACTIONS,
  consolePages: [{ path: "/console/domains", title: "Domains", seenBy: STAFF_ROLES, routes: domainPages }],
});
