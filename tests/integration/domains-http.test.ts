import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { createDomainTicker } from "../../src/custom-domains/checks.ts";
import { type DohServer, startDohServer } from "../fixtures/doh-server.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { useTestApp } from "../helpers/app.ts";
import {
  domainSettings,
  EDGE_TARGET,
  PLATFORM_HOST,
  publishRecords,
  uniqueHost,
} from "../helpers/domains.ts";
import {
  bearer,
  json,
  login,
  type SignedInTenant,
  signedInPlatformAdmin,
  signedInTenant,
} from "../helpers/identity.ts";

let doh: DohServer;
let gateway: GatewayServer;
const clock = new ManualClock(Date.now());
let admin: string;
let a: SignedInTenant;
let b: SignedInTenant;

interface DomainBody {
  id: string;
  tenantId: string;
  hostname: string;
  status: string;
  verification: { type: string; name: string; value: string };
  cnameTargets: string[];
  tls: { gatewayHostnameId: string | null; hostnameStatus: string | null; certificateStatus: string | null };
  lastFailure: { code: string; reason: string } | null;
  nextCheckAt: string | null;
}

beforeAll(() => {
  doh = startDohServer();
  gateway = startGatewayServer();
});
afterAll(async () => {
  await doh.stop();
  await gateway.stop();
}, 60_000);
const app = useTestApp({ settings: () => domainSettings(doh, gateway), clock });
beforeAll(async () => {
  admin = (await signedInPlatformAdmin(app)).accessToken;
  // custom domains need a paid plan (the free plan has none): both tenants are on enterprise (admin tests add several to tenant A, and they count)
  a = await signedInTenant(app, { plan: "enterprise" });
  b = await signedInTenant(app, { plan: "enterprise" });
}, 60_000);

const adminBase = (tenantId: string) => `/api/admin/tenants/${tenantId}/domains`;
const auth = (token: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: {
    ...(init.headers as Record<string, string>),
    ...(bearer(token).headers as Record<string, string>),
  },
});
const post = (token: string, body: unknown) => auth(token, json(body));

async function adminAdd(tenantId: string, hostname: string) {
  return app.request(adminBase(tenantId), post(admin, { hostname }));
}

describe("admin endpoints", () => {
  test("POST answers the TXT record and the CNAME targets to set", async () => {
    const hostname = uniqueHost();
    const res = await adminAdd(a.id, hostname);
    expect(res.status).toBe(201);
    const body = (await res.json()) as DomainBody;
    expect(body).toMatchObject({
      hostname,
      tenantId: a.id,
      status: "Pending",
      verification: { type: "TXT", name: `_plinth-verification.${hostname}` },
      cnameTargets: [EDGE_TARGET, "fallback.plinth-test.example"],
      lastFailure: null,
    });
    expect(body.verification.value).toMatch(/^plinth-[A-Za-z0-9_-]{32}$/);

    const list = (await (await app.request(adminBase(a.id), auth(admin))).json()) as { items: DomainBody[] };
    expect(list.items.map((d) => d.id)).toContain(body.id);
    const shown = await app.request(`${adminBase(a.id)}/${body.id}`, auth(admin));
    expect(shown.status).toBe(200);
    expect(((await shown.json()) as DomainBody).verification).toEqual(body.verification);
    // the same id under another tenant does not exist
    expect((await app.request(`${adminBase(b.id)}/${body.id}`, auth(admin))).status).toBe(404);
  });

  const table: { input: string; status: number; stored?: (h: string) => string; field?: RegExp }[] = [
    // hostnames are case-insensitive: ASCII case and one trailing dot fold to the canonical form
    { input: "UPPER", status: 201, stored: (h) => h.toLowerCase() },
    { input: "trailing.", status: 201, stored: (h) => h.slice(0, -1) },
    { input: "bücher-idn", status: 400, field: /ASCII only/ },
    { input: "xn--bcher-kva.example.com", status: 201, stored: (h) => h },
    { input: "xn--pple-43d.com", status: 400, field: /mixes scripts/ }, // Cyrillic а + Latin
    { input: "metadata.google.internal", status: 400, field: /internal/ },
    { input: "kubernetes.default.svc.cluster.local", status: 400, field: /internal/ },
    { input: "localhost.localdomain", status: 400, field: /internal/ },
    { input: "127.0.0.1.nip.io", status: 400, field: /loopback or private/ },
    { input: "10-0-0-1.sslip.io", status: 400, field: /loopback or private/ },
    { input: "port:8443", status: 400, field: /no port/ },
    { input: "*.wild", status: 400, field: /wildcard/ },
    { input: PLATFORM_HOST, status: 400, field: /platform host/ },
    { input: `tenant.${PLATFORM_HOST}`, status: 400, field: /platform host/ },
  ];
  for (const row of table) {
    test(`hostname ${row.input} → ${row.status}`, async () => {
      const unique = uniqueHost();
      const hostname =
        row.input === "UPPER"
          ? unique.toUpperCase()
          : row.input === "trailing."
            ? `${unique}.`
            : row.input === "bücher-idn"
              ? `bücher-${unique}`
              : row.input === "port:8443"
                ? `${unique}:8443`
                : row.input === "*.wild"
                  ? `*.${unique}`
                  : row.input;
      const res = await adminAdd(a.id, hostname);
      expect(res.status).toBe(row.status);
      const body = (await res.json()) as DomainBody & { errors?: { path: string; message: string }[] };
      if (row.stored) expect(body.hostname).toBe(row.stored(hostname));
      if (row.field) {
        expect(res.headers.get("content-type")).toContain("application/problem+json");
        expect(body.errors?.[0]?.path).toBe("hostname");
        expect(body.errors?.[0]?.message).toMatch(row.field);
      }
    });
  }

  test("another tenant's claim on a name is neither refused nor revealed; the tenant's own again is 409", async () => {
    const hostname = uniqueHost();
    expect((await adminAdd(a.id, hostname)).status).toBe(201);
    expect((await adminAdd(b.id, hostname)).status).toBe(201);
    const again = await adminAdd(b.id, hostname);
    expect(again.status).toBe(409);
    expect(((await again.json()) as { code: string }).code).toBe("conflict");
    // a variant in another case, fully qualified, is the same name: folded, then the same 409
    const variant = await app.request(
      "/api/tenant/domains",
      post(b.owner.accessToken, { hostname: `${hostname.toUpperCase()}.` }),
    );
    expect(variant.status).toBe(409);
  });

  test("unknown or malformed tenant: 404; POST …/check makes it due now; DELETE removes it", async () => {
    expect((await adminAdd(crypto.randomUUID(), uniqueHost())).status).toBe(404);
    expect((await app.request(adminBase("not-a-uuid"), auth(admin))).status).toBe(404);
    expect((await app.request(adminBase(crypto.randomUUID()), auth(admin))).status).toBe(404);
    const created = (await (await adminAdd(a.id, uniqueHost())).json()) as DomainBody;
    const checked = await app.request(
      `${adminBase(a.id)}/${created.id}/check`,
      auth(admin, { method: "POST" }),
    );
    expect(checked.status).toBe(202);
    expect(((await checked.json()) as DomainBody).nextCheckAt).toBe(clock.now().toISOString());
    const removed = await app.request(`${adminBase(a.id)}/${created.id}`, auth(admin, { method: "DELETE" }));
    expect(removed.status).toBe(204);
    expect((await app.request(`${adminBase(a.id)}/${created.id}`, auth(admin))).status).toBe(404);
  });

  test("tenant users and anonymous callers cannot use the admin routes", async () => {
    expect((await app.request(adminBase(a.id), auth(a.owner.accessToken))).status).toBe(403);
    expect((await app.request(adminBase(a.id))).status).toBe(401);
  });
});

describe("tenant owner endpoints", () => {
  test("an owner adds and sees its own domains only", async () => {
    const res = await app.request(
      "/api/tenant/domains",
      post(a.owner.accessToken, { hostname: uniqueHost("own") }),
    );
    expect(res.status).toBe(201);
    const mine = (await res.json()) as DomainBody;
    expect(mine.tenantId).toBe(a.id);
    const listA = (await (await app.request("/api/tenant/domains", auth(a.owner.accessToken))).json()) as {
      items: DomainBody[];
    };
    expect(listA.items.every((d) => d.tenantId === a.id)).toBe(true);
    expect(listA.items.map((d) => d.id)).toContain(mine.id);
    const listB = (await (await app.request("/api/tenant/domains", auth(b.owner.accessToken))).json()) as {
      items: DomainBody[];
    };
    expect(listB.items.map((d) => d.id)).not.toContain(mine.id);
  });

  test("tenant B's owner gets 404 for tenant A's domain (show, check, delete), and it stays", async () => {
    const created = (await (await adminAdd(a.id, uniqueHost("cross"))).json()) as DomainBody;
    const path = `/api/tenant/domains/${created.id}`;
    expect((await app.request(path, auth(b.owner.accessToken))).status).toBe(404);
    expect((await app.request(`${path}/check`, auth(b.owner.accessToken, { method: "POST" }))).status).toBe(
      404,
    );
    expect((await app.request(path, auth(b.owner.accessToken, { method: "DELETE" }))).status).toBe(404);
    expect((await app.request(path, auth(a.owner.accessToken))).status).toBe(200);
  });

  test("members and platform staff are refused (403), anonymous callers 401", async () => {
    expect((await app.request("/api/tenant/domains", auth(a.member.accessToken))).status).toBe(403);
    expect(
      (await app.request("/api/tenant/domains", post(a.member.accessToken, { hostname: uniqueHost() })))
        .status,
    ).toBe(403);
    expect((await app.request("/api/tenant/domains", auth(admin))).status).toBe(403);
    expect((await app.request("/api/tenant/domains")).status).toBe(401);
  });
});

describe("end to end: a domain goes Active through the loop", () => {
  test("before: host not allowed, no certificate; after: the host reaches the tenant and the edge may issue", async () => {
    const hostname = uniqueHost("live");
    const added = (await (
      await app.request("/api/tenant/domains", post(a.owner.accessToken, { hostname }))
    ).json()) as DomainBody;
    const onHost = (path: string, init?: RequestInit, peer?: string) =>
      app.request(`http://${hostname}${path}`, init, peer);
    const permission = (domain: string, host = "10.20.30.40") =>
      app.request(
        `http://${host}/api/tls/permission?domain=${encodeURIComponent(domain)}`,
        undefined,
        "10.20.30.40",
      );

    const before = await onHost("/api/tenant/domains", auth(a.owner.accessToken));
    expect(before.status).toBe(400);
    expect(((await before.json()) as { code: string }).code).toBe("host_not_allowed");
    expect((await permission(hostname)).status).toBe(404);
    expect((await permission(PLATFORM_HOST)).status).toBe(200);
    expect((await permission(`unknown-${hostname}`)).status).toBe(404);

    publishRecords(doh, added);
    const ticker = createDomainTicker(app.deps);
    let rounds = 0;
    while ((await ticker.tick()) > 0 && rounds++ < 10) {} // other domains of this file are due too

    const after = await onHost("/api/tenant/domains", auth(a.owner.accessToken));
    expect(after.status).toBe(200);
    const items = ((await after.json()) as { items: DomainBody[] }).items;
    const live = items.find((d) => d.id === added.id);
    expect(live?.status).toBe("Active");
    // DNS verified, registered; the certificate is the gateway's business and shown separately
    expect(live?.tls.certificateStatus).toBe("pending_validation");
    expect(live?.tls.gatewayHostnameId).toBe(gateway.byHostname(hostname)?.id ?? "");

    // sign-in on the custom host needs no tenant code: the host is the tenant
    const signedIn = await login(app, { email: a.owner.email }, { host: hostname });
    expect(signedIn.status).toBe(200);
    // tenant B's token on tenant A's host finds nothing
    expect((await onHost("/api/tenant/domains", auth(b.owner.accessToken))).status).toBe(404);

    const allowed = await permission(hostname);
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toEqual({ domain: hostname, allowed: true });
    // only the exact canonical form: nothing is cut or folded into the real name
    const fullWidth = hostname.replace(/[a-z]/g, (ch) => String.fromCharCode(ch.charCodeAt(0) + 0xfee0));
    for (const variant of [
      hostname.toUpperCase(),
      `${hostname}.`,
      `${hostname}:443`,
      `${hostname}/evil`,
      `${hostname}?x`,
      `${hostname}#x`,
      ` ${hostname}`,
      `user@${hostname}`,
      fullWidth,
      hostname.replaceAll(".", "\u3002"),
      hostname.replaceAll(".", "\uff0e"),
    ])
      expect({ variant, status: (await permission(variant)).status }).toEqual({ variant, status: 404 });

    // removed: gone from the gateway, the host and the edge's permission at once in this process
    const removed = await app.request(
      `/api/tenant/domains/${added.id}`,
      auth(a.owner.accessToken, { method: "DELETE" }),
    );
    expect(removed.status).toBe(204);
    expect(gateway.byHostname(hostname)).toBeUndefined();
    expect((await permission(hostname)).status).toBe(404);
    expect((await onHost("/api/tenant/domains", auth(a.owner.accessToken))).status).toBe(400);
  });

  test("the routes are in the OpenAPI document", async () => {
    const doc = (await (await app.request("/api/openapi.json")).json()) as { paths: Record<string, unknown> };
    for (const path of [
      "/api/admin/tenants/{tenantId}/domains",
      "/api/admin/tenants/{tenantId}/domains/{id}",
      "/api/admin/tenants/{tenantId}/domains/{id}/check",
      "/api/tenant/domains",
      "/api/tenant/domains/{id}",
      "/api/tenant/domains/{id}/check",
      "/api/tls/permission",
    ])
      expect(Object.keys(doc.paths)).toContain(path);
  });
});
