import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, login, type SignedInTenant, signedInTenant } from "../helpers/identity.ts";

/**
 * Verified e-mail domains (docs/sso.md): claimed with a TXT record, checked through the DoH resolver
 * custom domains use (a real DoH JSON server run by the test), one verified owner per domain.
 */

let doh: DohServer;
beforeAll(() => {
  doh = startDohServer();
});
afterAll(async () => {
  await doh.stop();
});
const t = useTestApp({
  settings: () => ({
    ...relaxedLimits,
    "TenantDomains:DnsJsonEndpoint": doh.url,
    "TenantDomains:DnsTimeoutMs": "500",
  }),
});
let a: SignedInTenant;
let b: SignedInTenant;
let free: SignedInTenant;
beforeAll(async () => {
  a = await signedInTenant(t, { plan: "enterprise" });
  b = await signedInTenant(t, { plan: "enterprise" });
  free = await signedInTenant(t);
}, 60_000);

interface EmailDomain {
  id: string;
  domain: string;
  status: string;
  verification: { type: string; name: string; value: string };
  lastFailure: { code: string; reason: string } | null;
}
// the x: eight hex digits alone may spell an IP address (0a7a3a72 is 10.122.58.114), which the
// hostname rules refuse as a wildcard-DNS name, one domain in ~80
const uniqueDomain = () => `corp-${crypto.randomUUID().slice(0, 8)}x.example`;
const add = (tenant: SignedInTenant, domain: string, who: "owner" | "admin" = "owner") =>
  t.request("/api/tenant/email-domains", json({ domain }, tenant[who].headers));
const check = (tenant: SignedInTenant, id: string) =>
  t.request(`/api/tenant/email-domains/${id}/check`, { method: "POST", headers: tenant.owner.headers });

describe("e-mail domains", () => {
  test("a claim answers the TXT record; the check verifies it once the record holds the value", async () => {
    const domain = uniqueDomain();
    const res = await add(a, domain.toUpperCase());
    expect(res.status).toBe(201);
    const claim = (await res.json()) as EmailDomain;
    expect(claim).toMatchObject({ domain, status: "pending", verification: { type: "TXT" } });
    expect(claim.verification.name).toBe(`_plinth-verification.${domain}`);
    expect(res.headers.get("location")).toBe(`/api/tenant/email-domains/${claim.id}`);

    const missing = (await (await check(a, claim.id)).json()) as EmailDomain;
    expect(missing.status).toBe("failed");
    expect(missing.lastFailure?.code).toBe("dns_nxdomain");

    doh.setTxt(claim.verification.name, "something else");
    expect(((await (await check(a, claim.id)).json()) as EmailDomain).lastFailure?.code).toBe("txt_mismatch");

    doh.setTxt(claim.verification.name, claim.verification.value);
    const verified = (await (await check(a, claim.id)).json()) as EmailDomain;
    expect(verified).toMatchObject({ status: "verified", lastFailure: null });
    const events = await execute<{ data: { domain: string } }>(
      t.db,
      sql`select data from webhook_events where tenant_id = ${a.id} and type = 'email_domain.verified'`,
    );
    expect(events.map((e) => e.data.domain)).toContain(domain);

    const list = (await (
      await t.request("/api/tenant/email-domains", { headers: a.admin.headers })
    ).json()) as {
      items: EmailDomain[];
    };
    expect(list.items.map((d) => d.id)).toContain(claim.id);
    expect((await add(a, domain)).status).toBe(409);
  });

  test("one verified owner per domain: a tenant that proves ownership takes it from another", async () => {
    const domain = uniqueDomain();
    const first = (await (await add(a, domain)).json()) as EmailDomain;
    doh.setTxt(first.verification.name, first.verification.value);
    expect(((await (await check(a, first.id)).json()) as EmailDomain).status).toBe("verified");

    const second = (await (await add(b, domain)).json()) as EmailDomain;
    expect(second.status).toBe("pending");
    // b's check while the record holds a's value: b is not verified, a keeps it
    expect(((await (await check(b, second.id)).json()) as EmailDomain).status).toBe("failed");
    doh.setTxt(first.verification.name, second.verification.value);
    expect(((await (await check(b, second.id)).json()) as EmailDomain).status).toBe("verified");
    const aList = (await (
      await t.request("/api/tenant/email-domains", { headers: a.owner.headers })
    ).json()) as {
      items: EmailDomain[];
    };
    expect(aList.items.find((d) => d.id === first.id)).toMatchObject({
      status: "failed",
      lastFailure: { code: "ownership_moved" },
    });
  });

  test("a free-plan tenant gets 402; an admin may read but not claim; another tenant's domain is 404", async () => {
    expect((await add(free, uniqueDomain())).status).toBe(402);
    expect((await add(a, uniqueDomain(), "admin")).status).toBe(403);
    const mine = (await (await add(a, uniqueDomain())).json()) as EmailDomain;
    expect((await check(b, mine.id)).status).toBe(404);
    const del = (tenant: SignedInTenant) =>
      t.request(`/api/tenant/email-domains/${mine.id}`, { method: "DELETE", headers: tenant.owner.headers });
    expect((await del(b)).status).toBe(404);
    expect((await del(a)).status).toBe(204);
    expect((await del(a)).status).toBe(404);
  });

  test("a domain that is not a public name is refused, naming domain", async () => {
    const res = await add(a, "localhost");
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain("domain");
  });
});

describe("enforcement", () => {
  test("while enforced, a verified domain's member is refused the password; the break-glass owner and other domains are not", async () => {
    const c = await signedInTenant(t, { plan: "enterprise" });
    // the factory's users are all @example.com: verify it for c (taking it from any earlier holder)
    const claim = (await (await add(c, "example.com")).json()) as EmailDomain;
    doh.setTxt(claim.verification.name, claim.verification.value);
    expect(((await (await check(c, claim.id)).json()) as EmailDomain).status).toBe("verified");
    const put = (body: unknown, who: "owner" | "admin" = "owner") =>
      t.request("/api/tenant/sso/enforcement", { ...json(body, c[who].headers), method: "PUT" });
    expect((await put({ enforced: true }, "admin")).status).toBe(403);
    // a member, not an owner: no Active owner has this id
    expect((await put({ enforced: true, breakGlassUserId: c.member.id })).status).toBe(404);
    const on = await put({ enforced: true });
    expect(on.status).toBe(200);
    expect(await on.json()).toEqual({ enforced: true, breakGlassUserId: c.owner.id });

    const password = (email: string) => login(t, { email, tenant: c.code });
    expect((await password(c.member.email)).status).toBe(403);
    expect((await password(c.admin.email)).status).toBe(403);
    expect((await password(c.owner.email)).status).toBe(200);
    // another tenant's members with the same domain are not held by c's enforcement
    expect((await login(t, { email: a.member.email, tenant: a.code })).status).toBe(200);

    expect((await put({ enforced: false })).status).toBe(200);
    expect((await password(c.member.email)).status).toBe(200);
    expect((await put({ enforced: true }, "owner")).status).toBe(200);
    expect(
      (
        await t.request("/api/tenant/sso/enforcement", {
          ...json({ enforced: true }, free.owner.headers),
          method: "PUT",
        })
      ).status,
    ).toBe(402);
  });
});
