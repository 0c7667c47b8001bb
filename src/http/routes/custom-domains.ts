import { createRoute, z } from "@hono/zod-openapi";
import { assertFeature } from "../../billing/entitlements.ts";
import {
  createDomain,
  deleteDomain,
  getDomain,
  listDomains,
  requestDomainCheck,
} from "../../custom-domains/domains.ts";
import { tlsPermission } from "../../custom-domains/permission.ts";
import type { Deps } from "../../deps.ts";
import { recordUsage } from "../../usage/ledger.ts";
import { createRouter } from "../context.ts";
import { platformAdminOnly, tenantPrincipal } from "../guards.ts";
import { requireTenantUser } from "../middleware/auth.ts";
import { problem } from "../openapi.ts";

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
    createdAt: z.string(),
  })
  .openapi("TenantDomain");
const domainList = z.object({ items: z.array(domainSchema) }).openapi("TenantDomainList");
const newDomain = z
  .object({ hostname: z.string().min(1).max(300).openapi({ example: "app.customer.example" }) })
  .openapi("NewTenantDomain");
const ok = (description: string, schema: z.ZodType) => ({
  description,
  content: { "application/json": { schema } },
});

const tenantParam = z.object({ tenantId: z.string().openapi({ param: { name: "tenantId", in: "path" } }) });
const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });
const body = { required: true, content: { "application/json": { schema: newDomain } } };
const security = [{ bearer: [] }];

/** The five domain routes under `base`, as admins and tenant owners get them. */
function routes<P extends z.ZodRawShape>(base: string, tag: string, params: z.ZodObject<P>) {
  const withId = params.extend(idParam.shape);
  return {
    create: createRoute({
      method: "post",
      path: base,
      tags: [tag],
      summary: "Add a custom domain: answers the TXT record and CNAME targets to set.",
      security,
      request: { params, body },
      responses: {
        201: ok("Added, Pending until the records are verified.", domainSchema),
        400: problem("The hostname is not valid."),
        404: problem("No such tenant."),
        409: problem("The hostname is already registered."),
        ...(tag === "tenant"
          ? {
              402: problem("`payment_required`: the tenant's plan has no custom domains."),
              403: problem("`usage_limit_reached`: the plan's custom domain limit is reached."),
            }
          : {}),
      },
    }),
    list: createRoute({
      method: "get",
      path: base,
      tags: [tag],
      summary: "List the tenant's custom domains.",
      security,
      request: { params },
      responses: { 200: ok("The domains.", domainList), 404: problem("No such tenant.") },
    }),
    show: createRoute({
      method: "get",
      path: `${base}/{id}`,
      tags: [tag],
      summary: "Show a custom domain: status, last failure, TLS status.",
      security,
      request: { params: withId },
      responses: { 200: ok("The domain.", domainSchema), 404: problem("No such domain.") },
    }),
    check: createRoute({
      method: "post",
      path: `${base}/{id}/check`,
      tags: [tag],
      summary: "Re-check the domain at the loop's next tick, whatever its backoff.",
      security,
      request: { params: withId },
      responses: { 202: ok("Due at the next tick.", domainSchema), 404: problem("No such domain.") },
    }),
    remove: createRoute({
      method: "delete",
      path: `${base}/{id}`,
      tags: [tag],
      summary: "Remove the domain, from the TLS gateway too.",
      security,
      request: { params: withId },
      responses: {
        204: { description: "Removed." },
        404: problem("No such domain."),
        503: problem("The gateway did not confirm the removal; nothing was removed."),
      },
    }),
  };
}

/**
 * `custom_domains` usage (all-time): +1 per domain added, −1 per domain removed, whoever did it
 * (admins' additions count toward the tenant's quota too). Keyed by the domain id, so a retried
 * call never counts twice.
 */
async function countDomain(deps: Deps, tenantId: string, domainId: string, quantity: 1 | -1) {
  await recordUsage(deps, {
    tenantId,
    feature: "custom_domains",
    quantity,
    idempotencyKey: `custom_domains:${quantity > 0 ? "added" : "removed"}:${domainId}`,
  });
}

const admin = routes("/api/admin/tenants/{tenantId}/domains", "admin", tenantParam);
const tenant = routes("/api/tenant/domains", "tenant", z.object({}));

/** Platform admin: any tenant's domains. Mounted behind `/api/admin/*`'s guards. */
export function adminDomainRoutes(deps: Deps) {
  const router = createRouter();
  router.use("/api/admin/tenants/*", platformAdminOnly());
  return (
    router
      // operators act for the platform: the tenant's plan does not block them (usage still counts)
      .openapi(admin.create, async (c) => {
        const { tenantId } = c.req.valid("param");
        const domain = await createDomain(deps, tenantId, c.req.valid("json"));
        await countDomain(deps, tenantId, domain.id, 1);
        return c.json(domain, 201);
      })
      .openapi(admin.list, async (c) =>
        c.json({ items: await listDomains(deps, c.req.valid("param").tenantId) }, 200),
      )
      .openapi(admin.show, async (c) => {
        const { tenantId, id } = c.req.valid("param");
        return c.json(await getDomain(deps, tenantId, id), 200);
      })
      .openapi(admin.check, async (c) => {
        const { tenantId, id } = c.req.valid("param");
        return c.json(await requestDomainCheck(deps, tenantId, id), 202);
      })
      .openapi(admin.remove, async (c) => {
        const { tenantId, id } = c.req.valid("param");
        await deleteDomain(deps, tenantId, id);
        await countDomain(deps, tenantId, id, -1);
        return c.body(null, 204);
      })
  );
}

/**
 * Tenant owners: their own tenant's domains (every query scoped by the principal's tenant, so
 * another tenant's domain id is a 404). Mounted behind `/api/tenant/*` and the owner role.
 */
export function tenantDomainRoutes(deps: Deps) {
  const tenantId = (c: { get(key: "principal"): Parameters<typeof tenantPrincipal>[0] }) =>
    tenantPrincipal(c.get("principal")).tenantId;
  const router = createRouter();
  // defence in depth: app.ts guards these paths with the owner role too
  router.use("/api/tenant/domains", requireTenantUser(["owner"]));
  router.use("/api/tenant/domains/*", requireTenantUser(["owner"]));
  return router
    .openapi(tenant.create, async (c) => {
      const id = tenantId(c);
      // 402 payment_required when the plan has no custom domains, 403 usage_limit_reached at the
      // limit: first from the usage counter, then counted again under the tenant's lock as it inserts
      const feature = await assertFeature(deps, id, "custom_domains", 1);
      const domain = await createDomain(deps, id, c.req.valid("json"), { limit: feature.limit });
      await countDomain(deps, id, domain.id, 1);
      return c.json(domain, 201);
    })
    .openapi(tenant.list, async (c) => c.json({ items: await listDomains(deps, tenantId(c)) }, 200))
    .openapi(tenant.show, async (c) =>
      c.json(await getDomain(deps, tenantId(c), c.req.valid("param").id), 200),
    )
    .openapi(tenant.check, async (c) =>
      c.json(await requestDomainCheck(deps, tenantId(c), c.req.valid("param").id), 202),
    )
    .openapi(tenant.remove, async (c) => {
      const id = c.req.valid("param").id;
      await deleteDomain(deps, tenantId(c), id);
      await countDomain(deps, tenantId(c), id, -1);
      return c.body(null, 204);
    });
}

const permission = createRoute({
  method: "get",
  path: "/api/tls/permission",
  tags: ["tls"],
  summary:
    "On-demand TLS permission for a Caddy-style edge: 200 only for Active domains and the platform host.",
  request: { query: z.object({ domain: z.string().min(1).max(300) }) },
  responses: {
    200: ok(
      "A certificate may be issued for this name.",
      z.object({ domain: z.string(), allowed: z.literal(true) }),
    ),
    404: problem("Not a name served here."),
  },
});

/** Public, and exempt from the host allowlist (the edge calls by IP). Answers from an in-process cache. */
export function tlsPermissionRoutes(deps: Deps) {
  const allowed = tlsPermission(deps);
  return createRouter().openapi(permission, async (c) => {
    const domain = await allowed(c.req.valid("query").domain);
    return c.json({ domain, allowed: true as const }, 200);
  });
}
