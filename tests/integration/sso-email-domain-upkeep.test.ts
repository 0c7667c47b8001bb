import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { and, eq } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { dnsResolver } from "../../src/custom-domains/settings.ts";
import { auditEvents, tenantEmailDomains, webhookEvents } from "../../src/db/schema/index.ts";
import { startBackground } from "../../src/loops/background.ts";
import { tenantDomainsLoop } from "../../src/loops/tenant-domains-loop.ts";
import { expireEmailDomainClaims } from "../../src/sso/expire-email-domain-claims.ts";
import { recheckEmailDomains } from "../../src/sso/recheck-email-domains.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, type SignedInTenant, signedInTenant, signInHeaders } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";

/**
 * The upkeep of verified e-mail domains by the tenant-domain loop (docs/sso.md): unverified claims
 * removed when they expire, verified domains' TXT records re-checked through the DoH resolver (a
 * real DoH JSON server run by the test), a domain whose record stayed gone through the grace
 * unverified. Time moves by an injected clock.
 */

let doh: DohServer;
beforeAll(() => {
  doh = startDohServer();
});
afterAll(async () => {
  await doh.stop();
});
const clock = new ManualClock();
const t = useTestApp({
  clock,
  settings: () => ({
    ...relaxedLimits,
    "TenantDomains:DnsJsonEndpoint": doh.url,
    "TenantDomains:DnsTimeoutMs": "500",
    "TenantDomains:ClaimExpiryDays": "14",
    "Sso:EmailDomainRecheckHours": "24",
    "Sso:EmailDomainGraceDays": "7",
  }),
});
let a: SignedInTenant;
let owner: Record<string, string> = {};
beforeAll(async () => {
  a = await signedInTenant(t, { plan: "enterprise" });
}, 60_000);

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const loopCtx = systemCtx("tenant-domains");
const uniqueDomain = () => `corp-${crypto.randomUUID().slice(0, 8)}x.example`;
const expire = () => expireEmailDomainClaims(t.deps, loopCtx, { limit: 50 });
const recheck = () =>
  recheckEmailDomains(t.deps, loopCtx, {
    limit: 50,
    resolver: dnsResolver(t.deps.config.settings.TenantDomains, t.deps.fetch),
  });
const row = async (id: string) =>
  (await t.db.select().from(tenantEmailDomains).where(eq(tenantEmailDomains.id, id)))[0];
const auditOf = (id: string) =>
  t.db
    .select({ action: auditEvents.action, details: auditEvents.details, tenantId: auditEvents.tenantId })
    .from(auditEvents)
    .where(and(eq(auditEvents.targetType, "email_domain"), eq(auditEvents.targetId, id)));

interface Claim {
  id: string;
  domain: string;
  verification: { name: string; value: string };
}

/** A claim made through the API now (signs the owner in again: the clock may have moved). */
async function claim(): Promise<Claim> {
  owner = await signInHeaders((path, init) => t.request(path, init), {
    email: a.owner.email,
    tenant: a.code,
  });
  const res = await t.request("/api/tenant/email-domains", json({ domain: uniqueDomain() }, owner));
  expect(res.status).toBe(201);
  return (await res.json()) as Claim;
}

/** A claim of `a`, verified now through the API's check with its record published. */
async function verifiedClaim(): Promise<Claim> {
  const c = await claim();
  doh.setTxt(c.verification.name, c.verification.value);
  const res = await t.request(`/api/tenant/email-domains/${c.id}/check`, {
    method: "POST",
    headers: owner,
  });
  expect(((await res.json()) as { status: string }).status).toBe("verified");
  return c;
}

describe("claim expiry", () => {
  test("an unverified claim is removed when its time is up, audited; a verified one and a younger one stay", async () => {
    const old = await claim();
    const kept = await verifiedClaim();
    clock.advance(10 * DAY);
    // made ten days later: not due when the first is
    const young = await claim();
    clock.advance(4 * DAY + 1000);
    expect(await expire()).toBe(1);
    expect(await row(old.id)).toBeUndefined();
    expect((await row(kept.id))?.status).toBe("verified");
    expect(await row(young.id)).toBeDefined();
    expect(await auditOf(old.id)).toContainEqual({
      action: "email_domain.removed",
      details: expect.objectContaining({ domain: old.domain, reason: "claim expired", status: "pending" }),
      tenantId: a.id,
    });
    // nothing more is due
    expect(await expire()).toBe(0);
    clock.advance(10 * DAY);
    expect(await expire()).toBeGreaterThanOrEqual(1);
    expect(await row(young.id)).toBeUndefined();
  });
});

describe("re-checking verified domains", () => {
  test("a record gone is noted, stays verified through the grace, then the domain is unverified, announced and expires", async () => {
    await expire();
    const c = await verifiedClaim();
    // not due before the re-check interval
    clock.advance(23 * HOUR);
    await recheck();
    expect((await row(c.id))?.recordMissingSince).toBeNull();
    // the record holds at the next due re-check: nothing changes but the time of the check
    clock.advance(2 * HOUR);
    expect(await recheck()).toBeGreaterThanOrEqual(1);
    expect(await row(c.id)).toMatchObject({
      status: "verified",
      lastFailureCode: null,
      recordMissingSince: null,
    });
    expect((await row(c.id))?.lastCheckedAt?.getTime()).toBe(clock.now().getTime());

    // the record vanishes: noted, still verified, audited once
    doh.zone.delete(c.verification.name);
    clock.advance(25 * HOUR);
    const goneAt = clock.now();
    await recheck();
    expect(await row(c.id)).toMatchObject({
      status: "verified",
      lastFailureCode: "dns_nxdomain",
      recordMissingSince: goneAt,
    });
    clock.advance(25 * HOUR);
    await recheck();
    expect((await row(c.id))?.recordMissingSince).toEqual(goneAt);
    expect((await auditOf(c.id)).filter((e) => e.action === "email_domain.record_missing")).toHaveLength(1);

    // a resolver failing proves nothing: the grace neither starts over nor ends on it
    doh.mode = "down";
    clock.advance(6 * DAY);
    await recheck();
    doh.mode = "ok";
    expect(await row(c.id)).toMatchObject({ status: "verified", lastFailureCode: "dns_error" });

    // seven days after it went: unverified, announced, and the claim now expires
    clock.advance(DAY);
    await recheck();
    const lost = await row(c.id);
    expect(lost).toMatchObject({ status: "failed", verifiedAt: null, recordMissingSince: null });
    expect(lost?.lastFailureCode).toBe("dns_nxdomain");
    expect(lost?.lastFailureReason).toContain(goneAt.toISOString());
    expect(lost?.expiresAt?.getTime()).toBe(clock.now().getTime() + 14 * DAY);
    expect(await auditOf(c.id)).toContainEqual({
      action: "email_domain.unverified",
      details: expect.objectContaining({ domain: c.domain, code: "dns_nxdomain" }),
      tenantId: a.id,
    });
    const events = await t.db
      .select({ data: webhookEvents.data })
      .from(webhookEvents)
      .where(and(eq(webhookEvents.tenantId, a.id), eq(webhookEvents.type, "email_domain.unverified")));
    expect(events.map((e) => e.data)).toContainEqual(
      expect.objectContaining({ emailDomainId: c.id, domain: c.domain, code: "dns_nxdomain" }),
    );
    // a failed domain is no longer re-checked by the loop; it expires as any unverified claim
    clock.advance(14 * DAY);
    await expire();
    expect(await row(c.id)).toBeUndefined();
  });

  test("a record restored within the grace clears it", async () => {
    const c = await verifiedClaim();
    doh.setTxt(c.verification.name, "someone else's value");
    clock.advance(25 * HOUR);
    await recheck();
    expect(await row(c.id)).toMatchObject({ status: "verified", lastFailureCode: "txt_mismatch" });
    expect((await row(c.id))?.recordMissingSince).not.toBeNull();
    doh.setTxt(c.verification.name, c.verification.value);
    clock.advance(5 * DAY);
    await recheck();
    expect(await row(c.id)).toMatchObject({
      status: "verified",
      lastFailureCode: null,
      recordMissingSince: null,
    });
    clock.advance(5 * DAY);
    await recheck();
    expect((await row(c.id))?.status).toBe("verified");
  });

  test("the server's tenant-domain loop runs both: an expired claim goes, a due domain is re-checked", async () => {
    const stale = await claim();
    const c = await verifiedClaim();
    doh.zone.delete(c.verification.name);
    clock.advance(15 * DAY);
    const background = await startBackground(t.deps, { loops: { tenantDomains: tenantDomainsLoop } });
    try {
      await waitFor(async () => (await row(stale.id)) === undefined, { what: "expired claim removed" });
      await waitFor(async () => (await row(c.id))?.recordMissingSince != null, { what: "re-checked" });
    } finally {
      await background.stop(1_000);
    }
  });
});
