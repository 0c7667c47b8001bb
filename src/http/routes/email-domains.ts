import { z } from "@hono/zod-openapi";
import {
  addEmailDomain,
  checkEmailDomain,
  listEmailDomains,
  removeEmailDomain,
} from "../../sso/email-domains.ts";
import { setSsoEnforcement } from "../../sso/enforcement.ts";
import type { SsoDeps } from "../../sso/sso-deps.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { TENANT_ROLES } from "../console/layout.ts";
import { ssoPages } from "../console/pages-sso.ts";
import { apiRoute, json, jsonBody, pageQuery, problem } from "../openapi.ts";
import { createRouter, tenantCtxOf } from "../request-context.ts";
import { HOSTNAME_PATTERN } from "./custom-domains.ts";
import { EMAIL_DOMAINS_ACTIONS } from "./email-domains-actions.ts";

const emailDomain = z
  .object({
    id: z.uuid(),
    domain: z.string(),
    status: z.enum(["pending", "failed", "verified"]),
    verification: z.object({
      type: z.literal("TXT"),
      name: z
        .string()
        .openapi({ description: "The TXT record name: `<VerificationRecordPrefix>.<domain>`." }),
      value: z.string().openapi({ description: "The value the TXT record must hold." }),
    }),
    lastFailure: z.object({ code: z.string(), reason: z.string() }).nullable(),
    lastCheckedAt: z.string().nullable(),
    verifiedAt: z.string().nullable(),
    recordMissingSince: z.string().nullable().openapi({
      description:
        "A verified domain whose TXT record a re-check found gone: since when. It turns `failed` `Sso:EmailDomainGraceDays` later unless the record is restored; null while it holds.",
    }),
    expiresAt: z.string().nullable().openapi({
      description:
        "When an unverified claim is removed (`TenantDomains:ClaimExpiryDays`); null once verified.",
    }),
    createdAt: z.string(),
  })
  .openapi("EmailDomain");
const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });
const read = tenantAccess(["owner", "admin"], { apiKey: "none" });
const write = tenantAccess(["owner"], { apiKey: "none" });

const routes = {
  add: apiRoute(
    write,
    {
      method: "post",
      path: "/api/tenant/email-domains",
      operationId: "tenantAddEmailDomain",
      tags: ["tenant"],
      summary: "Claim an e-mail domain for single sign-on: answers the TXT record to publish.",
      request: {
        body: jsonBody(
          z
            .object({
              domain: z
                .string()
                .min(1)
                .max(300)
                .openapi({ pattern: HOSTNAME_PATTERN.source, example: "example.com" }),
            })
            .openapi("NewEmailDomain"),
        ),
      },
      responses: {
        201: json("Claimed, pending until its TXT record is checked.", emailDomain),
        402: problem("`payment_required`: the tenant's plan has no `sso`."),
        409: problem("This tenant has already added this domain (other tenants' claims are never revealed)."),
      },
    },
    { location: true },
  ),
  list: apiRoute(read, {
    method: "get",
    path: "/api/tenant/email-domains",
    operationId: "tenantListEmailDomains",
    tags: ["tenant"],
    summary: "The tenant's e-mail domains, newest first, a page at a time.",
    request: { query: z.object(pageQuery) },
    responses: {
      200: json(
        "A page of domains; pass `nextCursor` as `cursor` for the next one (null on the last page).",
        z
          .object({ items: z.array(emailDomain), nextCursor: z.string().nullable() })
          .openapi("EmailDomainList"),
      ),
      400: problem("The limit or the cursor is not valid."),
    },
  }),
  check: apiRoute(write, {
    method: "post",
    path: "/api/tenant/email-domains/{id}/check",
    operationId: "tenantCheckEmailDomain",
    tags: ["tenant"],
    summary:
      "Check the domain's TXT record now: verified when it holds the value (one verified owner per domain).",
    request: { params: idParam },
    responses: {
      200: json("Checked: `verified`, or `failed` with the reason.", emailDomain),
      404: problem("No such e-mail domain."),
    },
  }),
  remove: apiRoute(write, {
    method: "delete",
    path: "/api/tenant/email-domains/{id}",
    operationId: "tenantRemoveEmailDomain",
    tags: ["tenant"],
    summary: "Remove an e-mail domain: its addresses are no longer routed to the tenant's connection.",
    request: { params: idParam },
    responses: { 204: { description: "Removed." }, 404: problem("No such e-mail domain.") },
  }),
  enforcement: apiRoute(write, {
    method: "put",
    path: "/api/tenant/sso/enforcement",
    operationId: "tenantSetSsoEnforcement",
    tags: ["tenant"],
    summary:
      "Enforce single sign-on for the tenant's verified domains: password and e-mail-code sign-in refused.",
    description:
      "While enforced, an address of one of the tenant's verified e-mail domains cannot sign in to the tenant with a password or an e-mailed code (403), except the break-glass owner (`breakGlassUserId`, by default the owner turning it on). Platform staff are never held.",
    request: {
      body: jsonBody(
        z
          .object({ enforced: z.boolean(), breakGlassUserId: z.uuid().optional() })
          .openapi("SsoEnforcementChange"),
      ),
    },
    responses: {
      200: json(
        "Set.",
        z
          .object({ enforced: z.boolean(), breakGlassUserId: z.string().nullable() })
          .openapi("SsoEnforcement"),
      ),
      402: problem("`payment_required`: the tenant's plan has no `sso`."),
      404: problem("`breakGlassUserId` is no Active owner of this tenant."),
    },
  }),
};

/** A tenant's verified e-mail domains and SSO enforcement (docs/sso.md): owners change, admins read. */
export function emailDomainRoutes(deps: SsoDeps) {
  return createRouter()
    .openapi(routes.add, async (c) => {
      const domain = await addEmailDomain(deps, tenantCtxOf(c), c.req.valid("json"));
      return c.json(domain, 201, { location: `/api/tenant/email-domains/${domain.id}` });
    })
    .openapi(routes.list, async (c) =>
      c.json(await listEmailDomains(deps, tenantCtxOf(c), c.req.valid("query")), 200),
    )
    .openapi(routes.check, async (c) =>
      c.json(await checkEmailDomain(deps, tenantCtxOf(c), { id: c.req.valid("param").id }), 200),
    )
    .openapi(routes.enforcement, async (c) =>
      c.json(await setSsoEnforcement(deps, tenantCtxOf(c), c.req.valid("json")), 200),
    )
    .openapi(routes.remove, async (c) => {
      await removeEmailDomain(deps, tenantCtxOf(c), { id: c.req.valid("param").id });
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const emailDomainsArea = defineArea({
  name: "email-domains",
  routes: [emailDomainRoutes],
  auditActions: EMAIL_DOMAINS_ACTIONS,
  // one page for a tenant's enterprise sign-in: its domains, enforcement and SCIM tokens
  consolePages: [{ path: "/console/sso", title: "Single sign-on", seenBy: TENANT_ROLES, routes: ssoPages }],
});
