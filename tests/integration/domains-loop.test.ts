import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { checkCustomDomain } from "../../src/custom-domains/check-custom-domain.ts";
import { createDomainTicker, type DomainTicker } from "../../src/custom-domains/checks.ts";
import { claimDueDomains } from "../../src/custom-domains/claim-due-domains.ts";
import { createCustomDomain } from "../../src/custom-domains/create-custom-domain.ts";
import { deleteCustomDomain } from "../../src/custom-domains/delete-custom-domain.ts";
import type { GatewayClient } from "../../src/custom-domains/gateway.ts";
import { gatewayClient } from "../../src/custom-domains/settings.ts";
import { tenantDomains } from "../../src/db/schema/index.ts";
import { createDeps, type Deps } from "../../src/deps.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { testConfig, useTestDatabase } from "../helpers/app.ts";
import { API_ROLE_UNDER_TEST, appDatabaseOf, asRole, openTestDatabase } from "../helpers/database.ts";
import { domainRow, domainSettings, EDGE_TARGET, publishRecords, uniqueHost } from "../helpers/domains.ts";
import { createTenant } from "../helpers/identity.ts";
import { waitFor } from "../helpers/jobs.ts";

let doh: DohServer;
let gateway: GatewayServer;
const clock = new ManualClock("2026-11-22T00:00:00Z");
const logs: string[] = [];
let deps: Deps;
let tenantId: string;

async function makeDeps(
  extra: Record<string, string> = {},
  database = appDatabaseOf(t.database),
  sink = logs,
) {
  const config = testConfig({ settings: domainSettings(doh, gateway, extra) });
  return createDeps(config, { database, clock, logWrite: (l) => sink.push(l) });
}

afterAll(async () => {
  await doh.stop();
  await gateway.stop();
}, 60_000);
const t = useTestDatabase();
beforeAll(async () => {
  doh = startDohServer();
  gateway = startGatewayServer();
  deps = await makeDeps();
  tenantId = (await createTenant(t.database.db)).id;
}, 60_000);

/** Only the given domain is due: the others of this file wait far in the future. */
async function onlyDue(id: string) {
  await t.database.db.update(tenantDomains).set({ nextCheckAt: new Date("2100-01-01T00:00:00Z") });
  await t.database.db.update(tenantDomains).set({ nextCheckAt: clock.now() }).where(eq(tenantDomains.id, id));
}

async function addDomain(hostname = uniqueHost()) {
  const domain = await createCustomDomain(deps, systemCtx("test", tenantId), { hostname, forPlatform: true });
  await onlyDue(domain.id);
  return domain;
}

const ticker = (d = deps, owner?: string): DomainTicker => createDomainTicker(d, { owner });

describe("Pending → Active", () => {
  test("TXT holds the token and the CNAME is allowed: registered with the gateway, Active, host resolves", async () => {
    const domain = await addDomain();
    expect(await deps.tenants.byDomain(domain.hostname)).toBeNull(); // cached miss, cleared on activation
    publishRecords(doh, domain);
    expect(await ticker().tick()).toBe(1);

    const row = await domainRow(t.database.db, domain.id);
    expect(row.status).toBe("Active");
    expect(row.cnameTarget).toBe(EDGE_TARGET);
    expect(row.lastFailureCode).toBeNull();
    expect(row.lockedBy).toBeNull();
    expect(row.activatedAt?.toISOString()).toBe(clock.now().toISOString());
    const entry = gateway.byHostname(domain.hostname);
    expect(entry).toBeDefined();
    expect(row.gatewayHostnameId).toBe(entry?.id ?? "");
    // DNS success is not TLS: the certificate status is stored separately
    expect(row.gatewayStatus).toBe("pending");
    expect(row.tlsStatus).toBe("pending_validation");
    expect((await deps.tenants.byDomain(domain.hostname))?.id).toBe(tenantId);
    // the API key went as a Bearer token, to the configured zone
    const last = gateway.requests.at(-1);
    expect(last?.authorization).toBe(`Bearer ${gateway.apiKey}`);
    expect(logs.join("\n")).not.toContain(gateway.apiKey);
  });

  test("TXT data in several quoted chunks is joined; an allowed target with a trailing dot and any case matches", async () => {
    const domain = await addDomain();
    const value = domain.verification.value;
    doh.setTxt(domain.verification.name, "unrelated=1", [value.slice(0, 10), value.slice(10)]);
    doh.setCname(domain.hostname, "FALLBACK.plinth-test.example.");
    await ticker().tick();
    expect((await domainRow(t.database.db, domain.id)).status).toBe("Active");
  });

  test("an Active domain's certificate status is refreshed until the gateway reports it active", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    await ticker().tick();
    const before = await domainRow(t.database.db, domain.id);
    expect(before.tlsStatus).toBe("pending_validation");
    // due again after the first retry delay (60 s), not at once
    expect(await ticker().tick()).toBe(0);
    gateway.setStatus(domain.hostname, "active", "active");
    clock.advance(60_000);
    expect(await ticker().tick()).toBe(1);
    const after = await domainRow(t.database.db, domain.id);
    expect(after.status).toBe("Active");
    expect(after.tlsStatus).toBe("active");
    expect(after.gatewayStatus).toBe("active");
    // issued: never claimed again
    await t.database.db
      .update(tenantDomains)
      .set({ nextCheckAt: clock.now() })
      .where(eq(tenantDomains.id, domain.id));
    expect(await ticker().tick()).toBe(0);
  });
});

describe("failure reasons", () => {
  const cases: {
    name: string;
    code: string;
    arrange: (d: { hostname: string; verification: { name: string; value: string } }) => void;
    reason?: RegExp;
  }[] = [
    {
      name: "no TXT record (the name exists)",
      code: "txt_missing",
      arrange: (d) => {
        doh.set(d.verification.name, {});
        doh.setCname(d.hostname, EDGE_TARGET);
      },
      reason: /No TXT record/,
    },
    {
      name: "wrong token",
      code: "txt_mismatch",
      arrange: (d) => {
        doh.setTxt(d.verification.name, "plinth-someone-elses-token");
        doh.setCname(d.hostname, EDGE_TARGET);
      },
    },
    {
      name: "wrong CNAME",
      code: "cname_mismatch",
      arrange: (d) => {
        doh.setTxt(d.verification.name, d.verification.value);
        doh.setCname(d.hostname, "elsewhere.example.net");
      },
      reason: /points at elsewhere\.example\.net/,
    },
    {
      name: "no CNAME (NOERROR, no data)",
      code: "cname_missing",
      arrange: (d) => {
        doh.setTxt(d.verification.name, d.verification.value);
        doh.set(d.hostname, {});
      },
    },
    { name: "NXDOMAIN", code: "dns_nxdomain", arrange: () => {}, reason: /NXDOMAIN/ },
    {
      name: "SERVFAIL",
      code: "dns_error",
      arrange: (d) => doh.set(d.verification.name, { rcode: 2 }),
      reason: /SERVFAIL/,
    },
  ];
  for (const c of cases) {
    test(`${c.name} → Failed (${c.code}), nothing registered`, async () => {
      const domain = await addDomain();
      c.arrange(domain);
      const creates = gateway.creates;
      await ticker().tick();
      const row = await domainRow(t.database.db, domain.id);
      expect(row.status).toBe("Failed");
      expect(row.lastFailureCode).toBe(c.code);
      if (c.reason) expect(row.lastFailureReason ?? "").toMatch(c.reason);
      expect(row.checkAttempts).toBe(1);
      expect(row.lockedBy).toBeNull();
      expect(gateway.creates).toBe(creates);
      expect(await deps.tenants.byDomain(domain.hostname)).toBeNull();
    });
  }

  test("resolver down (HTTP 503) and resolver timing out → dns_error", async () => {
    for (const mode of ["down", "hang"] as const) {
      const domain = await addDomain();
      publishRecords(doh, domain);
      doh.mode = mode;
      try {
        await ticker().tick();
      } finally {
        doh.mode = "ok";
      }
      const row = await domainRow(t.database.db, domain.id);
      expect(row.status).toBe("Failed");
      expect(row.lastFailureCode).toBe("dns_error");
      expect(row.lastFailureReason ?? "").toMatch(mode === "down" ? /HTTP 503/ : /timed out after 300 ms/);
    }
  });

  test("resolver unreachable (connection refused) → dns_error", async () => {
    const offline = await makeDeps({ "TenantDomains:DnsJsonEndpoint": "http://127.0.0.1:9/dns-query" });
    const domain = await addDomain();
    publishRecords(doh, domain);
    await ticker(offline).tick();
    const row = await domainRow(t.database.db, domain.id);
    expect(row.lastFailureCode).toBe("dns_error");
    expect(row.lastFailureReason ?? "").toMatch(/unreachable/);
  });

  test("gateway error (5xx after the bounded retries, or a refusal) → gateway_error, not Active", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    gateway.failAll = true;
    gateway.failStatus = 500;
    const before = gateway.requests.length;
    try {
      await ticker().tick();
    } finally {
      gateway.failAll = false;
    }
    const row = await domainRow(t.database.db, domain.id);
    expect(row.status).toBe("Failed");
    expect(row.lastFailureCode).toBe("gateway_error");
    expect(row.lastFailureReason ?? "").toMatch(/HTTP 500: 1000 Internal error/);
    expect(row.lastFailureReason ?? "").not.toContain(gateway.apiKey);
    // 1 + GatewayRetries (2) lookups, each failing; never a create
    expect(gateway.requests.length - before).toBe(3);

    // a wrong API key is not retried
    const wrongKey = await makeDeps({ "TenantDomains:GatewayApiKey": "not-the-key" });
    const other = await addDomain();
    publishRecords(doh, other);
    const start = gateway.requests.length;
    await ticker(wrongKey).tick();
    const refused = await domainRow(t.database.db, other.id);
    expect(refused.lastFailureCode).toBe("gateway_error");
    expect(refused.lastFailureReason ?? "").toMatch(/HTTP 403: 10000 Authentication error/);
    expect(gateway.requests.length - start).toBe(1);
  });
});

describe("Failed → Active", () => {
  test("after the record is fixed and the backoff has passed", async () => {
    const domain = await addDomain();
    doh.setTxt(domain.verification.name, "wrong");
    doh.setCname(domain.hostname, EDGE_TARGET);
    await ticker().tick();
    expect((await domainRow(t.database.db, domain.id)).status).toBe("Failed");
    doh.setTxt(domain.verification.name, domain.verification.value);
    expect(await ticker().tick()).toBe(0); // backing off
    clock.advance(60_000);
    expect(await ticker().tick()).toBe(1);
    const row = await domainRow(t.database.db, domain.id);
    expect(row.status).toBe("Active");
    expect(row.lastFailureCode).toBeNull();
    expect(row.checkAttempts).toBe(0);
  });
});

describe("backoff", () => {
  test("exponential from RetryBaseSeconds, capped at RetryMaxSeconds; a check request skips it", async () => {
    const capped = await makeDeps({
      "TenantDomains:RetryBaseSeconds": "10",
      "TenantDomains:RetryMaxSeconds": "35",
    });
    const domain = await addDomain(); // nothing published: NXDOMAIN every time
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      const start = clock.now().getTime();
      expect(await ticker(capped).tick()).toBe(1);
      const row = await domainRow(t.database.db, domain.id);
      expect(row.checkAttempts).toBe(i + 1);
      const delay = row.nextCheckAt.getTime() - start;
      delays.push(delay);
      clock.advance(delay - 1);
      expect(await ticker(capped).tick()).toBe(0); // 1 ms early: not due
      clock.advance(1);
    }
    expect(delays).toEqual([10_000, 20_000, 35_000, 35_000]);

    // Failed and backing off: POST …/check makes it due at the next tick
    await ticker(capped).tick();
    expect(await ticker(capped).tick()).toBe(0);
    await checkCustomDomain(capped, systemCtx("test", tenantId), { id: domain.id });
    expect(await ticker(capped).tick()).toBe(1);
  });
});

describe("check requests", () => {
  test("a check requested while the domain is being checked is not lost to the backoff", async () => {
    const domain = await addDomain(); // nothing published: it fails
    doh.delayMs = 100;
    const tick = ticker().tick();
    try {
      await waitFor(() => doh.queries.some((q) => q.name === domain.hostname), { what: "check started" });
      clock.advance(5);
      await checkCustomDomain(deps, systemCtx("test", tenantId), { id: domain.id });
    } finally {
      doh.delayMs = 0;
    }
    expect(await tick).toBe(1);
    const row = await domainRow(t.database.db, domain.id);
    expect(row.status).toBe("Failed");
    expect(row.nextCheckAt.toISOString()).toBe(clock.now().toISOString());
    expect(await ticker().tick()).toBe(1);
    // without a request, the backoff holds
    expect((await domainRow(t.database.db, domain.id)).nextCheckAt.getTime()).toBe(
      clock.now().getTime() + 120_000,
    );
  });
});

describe("configuration incomplete", () => {
  for (const missing of [
    "TenantDomains:GatewayApiKey",
    "TenantDomains:GatewayBaseUrl",
    "TenantDomains:AllowedCnameTargets",
  ]) {
    test(`without ${missing} the loop changes nothing and says so once`, async () => {
      const sink: string[] = [];
      const config = testConfig({ settings: domainSettings(doh, gateway) });
      const s = config.settings.TenantDomains;
      if (missing.endsWith("GatewayApiKey")) s.GatewayApiKey = null;
      else if (missing.endsWith("GatewayBaseUrl")) s.GatewayBaseUrl = null;
      else s.AllowedCnameTargets = [];
      const incomplete = await createDeps(config, {
        database: appDatabaseOf(t.database),
        clock,
        logWrite: (l) => sink.push(l),
      });
      await expectNothing(incomplete, sink, missing);
    });
  }

  async function expectNothing(incomplete: Deps, sink: string[], missing: string) {
    const domain = await addDomain();
    publishRecords(doh, domain);
    const before = await domainRow(t.database.db, domain.id);
    const queries = doh.queries.length;
    const requests = gateway.requests.length;
    const loop = ticker(incomplete);
    expect(await loop.tick()).toBe(0);
    expect(await loop.tick()).toBe(0);
    expect(await domainRow(t.database.db, domain.id)).toEqual(before);
    expect(doh.queries.length).toBe(queries);
    expect(gateway.requests.length).toBe(requests);
    const told = sink.filter((l) => l.includes("configuration incomplete"));
    expect(told).toHaveLength(1);
    expect(told[0]).toContain(missing);
  }
});

describe("gateway registration", () => {
  test("an entry the gateway already has (a crash after the create) is adopted, not created again", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    const made = await fetch(`${gateway.baseUrl}/custom_hostnames`, {
      method: "POST",
      headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ hostname: domain.hostname, ssl: { method: "http", type: "dv" } }),
    });
    const existing = ((await made.json()) as { result: { id: string } }).result.id;
    const creates = gateway.creates;
    await ticker().tick();
    const row = await domainRow(t.database.db, domain.id);
    expect(row.status).toBe("Active");
    expect(row.gatewayHostnameId).toBe(existing);
    expect(gateway.creates).toBe(creates);
  });

  test("a lost create answer is followed by a lookup, never by a second create", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    gateway.loseCreateAnswers = 1;
    const creates = gateway.creates;
    await ticker().tick();
    const row = await domainRow(t.database.db, domain.id);
    expect(row.status).toBe("Active");
    expect(gateway.creates - creates).toBe(1);
    expect([...gateway.entries.values()].filter((e) => e.hostname === domain.hostname)).toHaveLength(1);
    expect(row.gatewayHostnameId).toBe(gateway.byHostname(domain.hostname)?.id ?? "");
  });

  test("deleting a domain removes it from the gateway too", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    await ticker().tick();
    expect(gateway.byHostname(domain.hostname)).toBeDefined();
    await deleteCustomDomain(deps, systemCtx("test", tenantId), { id: domain.id });
    expect(gateway.byHostname(domain.hostname)).toBeUndefined();
    expect(await deps.tenants.byDomain(domain.hostname)).toBeNull();
  });

  test("a domain deleted while it is being checked does not stay registered with the gateway", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    doh.delayMs = 150;
    const creates = gateway.creates;
    const tick = ticker().tick();
    try {
      await waitFor(() => doh.queries.some((q) => q.name === domain.hostname), { what: "check started" });
      await deleteCustomDomain(deps, systemCtx("test", tenantId), { id: domain.id }); // nothing at the gateway yet
    } finally {
      doh.delayMs = 0;
    }
    await tick;
    expect(gateway.creates).toBe(creates + 1); // registered after the delete, then taken off again
    expect(gateway.byHostname(domain.hostname)).toBeUndefined();
  });

  test("an Active domain deleted while its TLS status is being refreshed does not stay registered", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    await ticker().tick();
    expect((await domainRow(t.database.db, domain.id)).tlsStatus).toBe("pending_validation");
    const real = gatewayClient(deps.config.settings.TenantDomains, deps.logger);
    if (!real) throw new Error("gateway settings");
    // the delete lands between the claim and the refresh: the gateway answers 404, ensure registers anew
    const racing: GatewayClient = {
      ...real,
      get: async (id) => {
        await deleteCustomDomain(deps, systemCtx("test", tenantId), { id: domain.id });
        return real.get(id);
      },
    };
    const creates = gateway.creates;
    clock.advance(60_000);
    expect(await createDomainTicker(deps, { gateway: racing }).tick()).toBe(1);
    expect(gateway.creates).toBe(creates + 1); // registered after the delete, then taken off again
    expect(await t.database.db.select().from(tenantDomains).where(eq(tenantDomains.id, domain.id))).toEqual(
      [],
    );
    expect(gateway.byHostname(domain.hostname)).toBeUndefined();
  });

  test("a gateway outage keeps the domain (503) so the removal can be retried", async () => {
    const domain = await addDomain();
    publishRecords(doh, domain);
    await ticker().tick();
    gateway.failAll = true;
    try {
      await expect(
        deleteCustomDomain(deps, systemCtx("test", tenantId), { id: domain.id }),
      ).rejects.toMatchObject({ code: "unavailable" });
    } finally {
      gateway.failAll = false;
    }
    expect((await domainRow(t.database.db, domain.id)).status).toBe("Active");
    await deleteCustomDomain(deps, systemCtx("test", tenantId), { id: domain.id });
    expect(gateway.byHostname(domain.hostname)).toBeUndefined();
  });
});

describe("leases", () => {
  test("two processes on one database never check the same domain at once", async () => {
    await t.database.db.update(tenantDomains).set({ nextCheckAt: new Date("2100-01-01T00:00:00Z") });
    // a second process: the app's role, through the pooler in the scaled topology
    const second = await openTestDatabase(API_ROLE_UNDER_TEST ? asRole(t.url, API_ROLE_UNDER_TEST) : t.url, {
      poolSize: 4,
    });
    try {
      const settings = { "TenantDomains:BatchSize": "3" };
      const a = await makeDeps(settings);
      const b = await makeDeps(settings, second);
      const domains = [];
      for (let i = 0; i < 12; i++) {
        const d = await createCustomDomain(deps, systemCtx("test", tenantId), {
          hostname: uniqueHost("pair"),
          forPlatform: true,
        });
        publishRecords(doh, d);
        domains.push(d);
      }
      doh.delayMs = 20; // checks overlap in time
      doh.maxInFlightPerName = 0;
      const seen = new Map<string, string[]>();
      const record = (owner: string) => (d: { id: string }) =>
        seen.set(d.id, [...(seen.get(d.id) ?? []), owner]);
      const tickerA = createDomainTicker(a, { owner: "process-a", onChecked: record("process-a") });
      const tickerB = createDomainTicker(b, { owner: "process-b", onChecked: record("process-b") });
      const creates = gateway.creates;
      for (let round = 0; round < 10; round++) {
        const [x, y] = await Promise.all([tickerA.tick(), tickerB.tick()]);
        if (x + y === 0) break;
      }
      doh.delayMs = 0;
      for (const d of domains) {
        expect(seen.get(d.id)).toHaveLength(1);
        expect((await domainRow(t.database.db, d.id)).status).toBe("Active");
      }
      const owners = new Set([...seen.values()].flat());
      expect(owners).toEqual(new Set(["process-a", "process-b"]));
      expect(doh.maxInFlightPerName).toBe(1);
      expect(gateway.creates - creates).toBe(12);
    } finally {
      await second.close();
    }
  });

  test("a claimed domain is not claimed again until its lease runs out (a crashed process)", async () => {
    const domain = await addDomain();
    const now = clock.now();
    const first = await claimDueDomains(t.database.db, {
      owner: "crashed",
      now,
      leaseMs: 120_000,
      limit: 10,
    });
    expect(first.map((d) => d.id)).toEqual([domain.id]);
    expect(
      await claimDueDomains(t.database.db, { owner: "other", now, leaseMs: 120_000, limit: 10 }),
    ).toEqual([]);
    const later = new Date(now.getTime() + 120_000);
    const taken = await claimDueDomains(t.database.db, {
      owner: "other",
      now: later,
      leaseMs: 120_000,
      limit: 10,
    });
    expect(taken.map((d) => d.id)).toEqual([domain.id]);
    expect((await domainRow(t.database.db, domain.id)).lockedBy).toBe("other");
    await t.database.db
      .update(tenantDomains)
      .set({ lockedBy: null, lockedUntil: null })
      .where(eq(tenantDomains.id, domain.id));
  });
});
