import { Hono } from "hono";
import { checkCustomDomain } from "../../custom-domains/check-custom-domain.ts";
import type { DomainView } from "../../custom-domains/domain-view.ts";
import { getPlatformCustomDomain } from "../../custom-domains/get-platform-custom-domain.ts";
import { listPlatformCustomDomains } from "../../custom-domains/list-platform-custom-domains.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../tenancy/tenants.ts";
import { adminCtxOf, ctxOf } from "../request-context.ts";
import { DOMAIN_STATUSES, domainDetailBody, domainListBody } from "./domains-html.ts";
import { layout } from "./layout.ts";
import { consoleActed, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

/** How many domains the list shows (the newest). */
const DOMAINS_SHOWN = 200;

/** Domains across tenants by state; one domain's DNS diagnosis and TLS status; check now. */
export function domainPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();

  router.get("/console/domains", async (c) => {
    const viewer = viewerOf(c);
    const q = c.req.query("status");
    const status = (DOMAIN_STATUSES as readonly string[]).includes(q ?? "")
      ? (q as DomainView["status"])
      : undefined;
    const page = await listPlatformCustomDomains(deps, ctxOf(c, null), { status, limit: DOMAINS_SHOWN });
    const body = domainListBody({
      domains: page.items,
      status,
      more: page.nextCursor !== null,
      shown: DOMAINS_SHOWN,
    });
    return pageResponse(c, layout({ title: "Domains", section: "/console/domains", viewer, body }));
  });

  router.get("/console/tenants/:tenantId/domains/:id", async (c) => {
    const viewer = viewerOf(c);
    const { tenantId, id } = c.req.param();
    const domain = await getPlatformCustomDomain(deps, adminCtxOf(c, tenantId), { id });
    const body = domainDetailBody({ domain, viewer, checked: Boolean(c.req.query("done")) });
    return pageResponse(c, layout({ title: domain.hostname, section: "/console/domains", viewer, body }));
  });

  router.post("/console/tenants/:tenantId/domains/:id/check", async (c) => {
    const { tenantId, id } = c.req.param();
    if (!isUuid(tenantId)) throw new AppError("not_found", "No such domain.");
    // the same call as POST /api/admin/tenants/{tenantId}/domains/{id}/check
    await checkCustomDomain(deps, adminCtxOf(c, tenantId), { id });
    consoleActed(deps, c, "domain.check_requested", { type: "domain", id }, { tenantId });
    return seeOther(c, `/console/tenants/${tenantId}/domains/${id}?done=check`);
  });
  return router;
}
