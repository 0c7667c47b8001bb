import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { and, eq } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { createDomainTicker } from "../../src/custom-domains/checks.ts";
import { auditEvents, tenantDomains } from "../../src/db/schema/index.ts";
import { getCurrentUsage } from "../../src/usage/current-usage.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { domainRow, domainSettings, EDGE_TARGET, uniqueHost } from "../helpers/domains.ts";
import { json, signedInTenant } from "../helpers/identity.ts";

/**
 * Verified ownership decides, not first come: several tenants may claim one name, each with its own
 * TXT value; the first to verify is Active, and the name moves only to a tenant that publishes its
 * own value. Unverified claims expire. Against the DoH and gateway fixtures.
 */
let doh: DohServer;
let gateway: GatewayServer;
const clock = new ManualClock(Date.now());
beforeAll(() => {
  doh = startDohServer();
  gateway = startGatewayServer();
});
afterAll(async () => {
  await doh.stop();
  await gateway.stop();
}, 60_000);
const app = useTestApp({
  settings: () => ({
    ...relaxedLimits,
    ...domainSettings(doh, gateway, { "TenantDomains:ClaimExpiryDays": "3" }),
  }),
  clock,
});
const t = app.testDatabase;

interface DomainBody {
  id: string;
  hostname: string;
  status: string;
  verification: { name: string; value: string };
  lastFailure: { code: string; reason: string } | null;
  expiresAt: string | null;
  deactivatedAt: string | null;
}

/** A tenant on a plan with custom domains, and its owner's calls to the domain routes. */
async function tenantWithOwner() {
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const { headers } = tenant.owner;
  const auth = (init: RequestInit = {}): RequestInit => ({
    ...init,
    headers: { ...(init.headers as Record<string, string>), ...headers },
  });
  return {
    id: tenant.id,
    async add(hostname: string) {
      return app.request("/api/tenant/domains", json({ hostname }, headers));
    },
    async get(id: string) {
      return (await (await app.request(`/api/tenant/domains/${id}`, auth())).json()) as DomainBody;
    },
    async remove(id: string) {
      return app.request(`/api/tenant/domains/${id}`, auth({ method: "DELETE" }));
    },
    async check(id: string) {
      return app.request(`/api/tenant/domains/${id}/check`, auth({ method: "POST" }));
    },
  };
}

async function drain() {
  const ticker = createDomainTicker(app.deps);
  for (let rounds = 0; (await ticker.tick()) > 0 && rounds < 10; rounds++) {}
}

describe("several tenants claim one name", () => {
  test("a second claim is accepted and reveals nothing; each claim has its own TXT value", async () => {
    const [a, b] = [await tenantWithOwner(), await tenantWithOwner()];
    const hostname = uniqueHost("shared");
    const first = await a.add(hostname);
    expect(first.status).toBe(201);
    const second = await b.add(hostname);
    expect(second.status).toBe(201);
    const [ca, cb] = [(await first.json()) as DomainBody, (await second.json()) as DomainBody];
    expect(cb.status).toBe("Pending");
    expect(cb.lastFailure).toBeNull();
    expect(cb.verification.name).toBe(ca.verification.name);
    expect(cb.verification.value).not.toBe(ca.verification.value);
    // only this tenant's own second claim of the name conflicts
    const again = await b.add(hostname);
    expect(again.status).toBe(409);
    expect(((await again.json()) as { detail: string }).detail).toBe(
      "This tenant has already added this hostname.",
    );
  });

  test("the first to verify is Active; the other learns the name is in use only when checked; proving ownership moves it", async () => {
    const [a, b] = [await tenantWithOwner(), await tenantWithOwner()];
    const hostname = uniqueHost("move");
    const ca = (await (await a.add(hostname)).json()) as DomainBody;
    const cb = (await (await b.add(hostname)).json()) as DomainBody;
    doh.setCname(hostname, EDGE_TARGET);
    doh.setTxt(ca.verification.name, ca.verification.value);
    await drain();
    expect((await a.get(ca.id)).status).toBe("Active");
    // B's claim was checked alongside; asked again now, it is told the name is in use elsewhere
    expect((await b.check(cb.id)).status).toBe(202);
    await drain();
    const told = await b.get(cb.id);
    expect(told.status).toBe("Failed");
    expect(told.lastFailure?.code).toBe("in_use_elsewhere");
    const gatewayId = gateway.byHostname(hostname)?.id;
    expect(gatewayId).toBeDefined();

    // B publishes its own value: the name moves to B, A's domain is deactivated, both recorded
    doh.setTxt(cb.verification.name, cb.verification.value);
    expect((await b.check(cb.id)).status).toBe(202);
    await drain();
    const moved = await b.get(cb.id);
    expect(moved.status).toBe("Active");
    const lost = await a.get(ca.id);
    expect(lost.status).toBe("Failed");
    expect(lost.lastFailure?.code).toBe("ownership_moved");
    expect(lost.deactivatedAt).toBe(clock.now().toISOString());
    expect((await domainRow(t.database.db, cb.id)).gatewayHostnameId).toBe(gatewayId ?? "");
    expect((await domainRow(t.database.db, ca.id)).gatewayHostnameId).toBeNull();
    // the host now reaches B; A's token there finds nothing
    expect((await app.deps.tenants.byDomain(hostname))?.id).toBe(b.id);
    // A's TXT value is still published, yet A is not re-checked on its own: no back and forth
    await drain();
    expect((await a.get(ca.id)).status).toBe("Failed");
    expect((await b.get(cb.id)).status).toBe("Active");

    // A removing its lost claim leaves B's gateway entry alone
    const deletes = gateway.requests.filter((r) => r.method === "DELETE").length;
    expect((await a.remove(ca.id)).status).toBe(204);
    expect(gateway.requests.filter((r) => r.method === "DELETE").length).toBe(deletes);
    expect(gateway.byHostname(hostname)?.id).toBe(gatewayId ?? "");
  });

  test("Pending and Failed claims expire after TenantDomains:ClaimExpiryDays, usage given back", async () => {
    const a = await tenantWithOwner();
    const pending = (await (await a.add(uniqueHost("exp"))).json()) as DomainBody;
    expect(pending.expiresAt).toBe(new Date(clock.now().getTime() + 3 * 86_400_000).toISOString());
    expect(
      await getCurrentUsage(app.deps, systemCtx("test", a.id), {
        feature: "custom_domains",
        period: "never",
      }),
    ).toBe(1);
    clock.advance(3 * 86_400_000 - 1000);
    await drain();
    expect((await domainRow(t.database.db, pending.id)).status).toBe("Failed"); // no DNS records: kept until it expires
    clock.advance(2000);
    await drain();
    const rows = await t.database.db.select().from(tenantDomains).where(eq(tenantDomains.id, pending.id));
    expect(rows).toEqual([]);
    expect(
      await getCurrentUsage(app.deps, systemCtx("test", a.id), {
        feature: "custom_domains",
        period: "never",
      }),
    ).toBe(0);
    // recorded in the tenant's audit log, by the loop
    const removed = await t.database.db
      .select({ actorId: auditEvents.actorId, details: auditEvents.details })
      .from(auditEvents)
      .where(and(eq(auditEvents.tenantId, a.id), eq(auditEvents.action, "domain.removed")));
    expect(removed).toEqual([
      { actorId: "tenant-domains", details: { hostname: pending.hostname, reason: "claim expired" } },
    ]);
  });
});
