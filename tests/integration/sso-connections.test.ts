import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { and, eq } from "drizzle-orm";
import { auditEvents, ssoConnections, totpFactors, webhookEvents } from "../../src/db/schema/index.ts";
import { AppError } from "../../src/errors.ts";
import { readTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { checkOidcIssuer } from "../../src/sso/oidc/oidc-issuer-check.ts";
import { type OidcPeer, startOidcPeer } from "../fixtures/oidc-provider.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { json, newMasterKey, type SignedInTenant, signedInTenant } from "../helpers/identity.ts";
import { startSamlIdp, type TestIdp } from "../helpers/saml-idp.ts";

/**
 * The connections API (`/api/tenant/sso/connections`, docs/sso.md "Connections API") against a real
 * OpenID provider (oidc-provider) and a real SAML IdP's metadata: discovery at creation, the client
 * secret sealed and never answered, SAML metadata checked, the `sso` feature, roles, step-up, audit
 * rows and webhook events; and the provider guard (SSRF) on issuers and metadata URLs.
 */

let peer: OidcPeer;
let idp: TestIdp;
beforeAll(async () => {
  peer = await startOidcPeer({ redirectUri: "http://127.0.0.1:1/api/auth/sso/oidc/callback" });
  idp = startSamlIdp();
});
const t = useTestApp({
  settings: {
    ...relaxedLimits,
    "Security:TenantSecrets:KeyId": "k1",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
    // the test's provider and IdP listen on the loopback address
    "Sso:AllowPrivateProviders": "true",
  },
});
let tenant: SignedInTenant;
let other: SignedInTenant;
beforeAll(async () => {
  tenant = await signedInTenant(t, { plan: "enterprise" });
  other = await signedInTenant(t, { plan: "enterprise" });
}, 30_000);
afterAll(async () => {
  await peer?.stop();
  idp?.stop();
});

const PATH = "/api/tenant/sso/connections";
const call = (headers: Record<string, string>, method: string, path: string, body?: unknown) =>
  t.request(path, body === undefined ? { method, headers } : { ...json(body, headers), method });
const oidcBody = () => ({
  type: "oidc",
  issuer: peer.issuer,
  clientId: peer.clientId,
  clientSecret: peer.clientSecret,
});

interface ConnectionBody {
  id: string;
  type: string;
  enabled: boolean;
  name: string;
  oidc: { issuer: string; clientId: string; clientSecretSet: boolean; redirectUri: string } | null;
  saml: {
    idpEntityId: string;
    spEntityId: string;
    acsUrl: string;
    certificates: { fingerprint: string }[];
  } | null;
  defaultRole: string;
  claimMapping: Record<string, string>;
}

/** Removes every connection of `who`'s tenant (each test starts from none). */
async function clear(who: SignedInTenant) {
  await t.db.delete(ssoConnections).where(eq(ssoConnections.tenantId, who.id));
}

describe("OIDC connections", () => {
  test("created with its issuer discovered, the secret sealed and never answered; listed, read, audited and announced", async () => {
    await clear(tenant);
    const res = await call(tenant.owner.headers, "POST", PATH, { ...oidcBody(), name: "Corp IdP" });
    expect(res.status).toBe(201);
    const text = await res.text();
    expect(text).not.toContain(peer.clientSecret);
    const created = JSON.parse(text) as ConnectionBody;
    expect(res.headers.get("location")).toBe(`${PATH}/${created.id}`);
    expect(created).toMatchObject({
      type: "oidc",
      name: "Corp IdP",
      enabled: true,
      oidc: { issuer: peer.issuer, clientId: peer.clientId, clientSecretSet: true },
      saml: null,
      defaultRole: "member",
      claimMapping: { email: "email", name: "name", groups: "groups" },
    });
    expect(created.oidc?.redirectUri).toEndWith("/api/auth/sso/oidc/callback");
    const keyring = t.deps.tenantSecretKeyring;
    if (!keyring) throw new Error("no keyring");
    const [row] = await t.db.select().from(ssoConnections).where(eq(ssoConnections.id, created.id));
    expect(await readTenantSecret(t.db, keyring, tenant.id, row?.clientSecretName ?? "")).toBe(
      peer.clientSecret,
    );

    const listed = await call(tenant.admin.headers, "GET", PATH);
    expect(listed.status).toBe(200);
    const page = (await listed.json()) as { items: ConnectionBody[]; nextCursor: string | null };
    expect(page.items.map((c) => c.id)).toEqual([created.id]);
    expect(page.nextCursor).toBeNull();
    const got = await call(tenant.admin.headers, "GET", `${PATH}/${created.id}`);
    expect(await got.json()).toEqual(created);

    const [audit] = await t.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.action, "sso_connection.created"), eq(auditEvents.targetId, created.id)));
    expect(audit?.details).toMatchObject({ type: "oidc", status: "active", issuer: peer.issuer });
    expect(JSON.stringify(audit)).not.toContain(peer.clientSecret);
    const events = await t.db.select().from(webhookEvents).where(eq(webhookEvents.tenantId, tenant.id));
    expect(events.find((e) => e.type === "sso_connection.created")?.data).toEqual({
      connectionId: created.id,
      type: "oidc",
      enabled: true,
    });
  });

  test("an issuer whose discovery fails is a 422 naming `issuer` and what failed; an unreachable one a 503", async () => {
    const refused = async (issuer: string) => {
      const res = await call(tenant.owner.headers, "POST", PATH, { ...oidcBody(), issuer });
      expect(res.status).toBe(422);
      const problem = (await res.json()) as { code: string; errors: { path: string; message: string }[] };
      expect(problem.code).toBe("unprocessable");
      expect(problem.errors[0]?.path).toBe("issuer");
      return problem.errors[0]?.message ?? "";
    };
    // the provider answers 404 under another path: its discovery document is not there
    expect(await refused(`${peer.issuer}/elsewhere`)).toContain("discovery document");
    // not a URL at all: the document's pattern says so (400 naming the field)
    const notUrl = await call(tenant.owner.headers, "POST", PATH, { ...oidcBody(), issuer: "not a url" });
    expect(notUrl.status).toBe(400);
    expect(JSON.stringify(await notUrl.json())).toContain("issuer");
    const down = await call(tenant.owner.headers, "POST", PATH, {
      ...oidcBody(),
      issuer: "http://127.0.0.1:9",
    });
    expect(down.status).toBe(503);
    expect(((await down.json()) as { detail: string }).detail).toContain("could not be reached");
    const rows = await t.db
      .select()
      .from(ssoConnections)
      .where(eq(ssoConnections.issuer, `${peer.issuer}/elsewhere`));
    expect(rows).toEqual([]);
  });

  test("changed: name, role, claim mapping, a replacement secret, enabled (one at a time: 409); audited without the secret", async () => {
    await clear(tenant);
    const first = (await (
      await call(tenant.owner.headers, "POST", PATH, oidcBody())
    ).json()) as ConnectionBody;
    const second = (await (
      await call(tenant.owner.headers, "POST", PATH, oidcBody())
    ).json()) as ConnectionBody;
    expect([first.enabled, second.enabled]).toEqual([true, false]);
    const conflict = await call(tenant.owner.headers, "PATCH", `${PATH}/${second.id}`, { enabled: true });
    expect(conflict.status).toBe(409);
    const conflictCreate = await call(tenant.owner.headers, "POST", PATH, { ...oidcBody(), enabled: true });
    expect(conflictCreate.status).toBe(409);

    const res = await call(tenant.admin.headers, "PATCH", `${PATH}/${first.id}`, {
      name: "Renamed",
      defaultRole: "admin",
      groupRoles: { owners: "owner" },
      claimMapping: { email: "mail" },
      clientSecret: "a-new-secret-value",
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain("a-new-secret-value");
    expect(JSON.parse(text)).toMatchObject({
      name: "Renamed",
      defaultRole: "admin",
      groupRoles: { owners: "owner" },
      claimMapping: { email: "mail", name: "name", groups: "groups" },
    });
    const keyring = t.deps.tenantSecretKeyring;
    if (!keyring) throw new Error("no keyring");
    const [row] = await t.db.select().from(ssoConnections).where(eq(ssoConnections.id, first.id));
    expect(await readTenantSecret(t.db, keyring, tenant.id, row?.clientSecretName ?? "")).toBe(
      "a-new-secret-value",
    );
    const audits = await t.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.action, "sso_connection.updated"), eq(auditEvents.targetId, first.id)));
    expect(audits[0]?.details).toMatchObject({
      fields: ["claimMapping", "clientSecret", "defaultRole", "groupRoles", "name"],
    });
    expect(JSON.stringify(audits)).not.toContain("a-new-secret-value");

    // a SAML field on an OIDC connection
    const foreign = await call(tenant.owner.headers, "PATCH", `${PATH}/${first.id}`, {
      metadataUrl: "https://idp.example/metadata",
    });
    expect(foreign.status).toBe(422);
    expect(JSON.stringify(await foreign.json())).toContain("metadataUrl");

    // switching: disable the first, enable the second
    expect(
      (await call(tenant.owner.headers, "PATCH", `${PATH}/${first.id}`, { enabled: false })).status,
    ).toBe(200);
    const enabled = await call(tenant.owner.headers, "PATCH", `${PATH}/${second.id}`, { enabled: true });
    expect(((await enabled.json()) as ConnectionBody).enabled).toBe(true);
  });

  test("deleted with its client secret; then 404; announced", async () => {
    await clear(tenant);
    const created = (await (
      await call(tenant.owner.headers, "POST", PATH, oidcBody())
    ).json()) as ConnectionBody;
    const [row] = await t.db.select().from(ssoConnections).where(eq(ssoConnections.id, created.id));
    const res = await call(tenant.owner.headers, "DELETE", `${PATH}/${created.id}`);
    expect(res.status).toBe(204);
    expect((await call(tenant.owner.headers, "GET", `${PATH}/${created.id}`)).status).toBe(404);
    expect((await call(tenant.owner.headers, "DELETE", `${PATH}/${created.id}`)).status).toBe(404);
    const keyring = t.deps.tenantSecretKeyring;
    if (!keyring) throw new Error("no keyring");
    expect(await readTenantSecret(t.db, keyring, tenant.id, row?.clientSecretName ?? "")).toBeNull();
    const events = await t.db.select().from(webhookEvents).where(eq(webhookEvents.tenantId, tenant.id));
    expect(events.some((e) => e.type === "sso_connection.deleted")).toBe(true);
  });
});

describe("SAML connections", () => {
  test("created from the IdP's metadata (given or by URL): entity id, SSO URL, certificate, the SP's values", async () => {
    await clear(tenant);
    const fromXml = await call(tenant.owner.headers, "POST", PATH, {
      type: "saml",
      metadataXml: idp.metadataXml,
    });
    expect(fromXml.status).toBe(201);
    const body = (await fromXml.json()) as ConnectionBody;
    expect(body.oidc).toBeNull();
    expect(body.saml?.idpEntityId).toBe(idp.entityId);
    expect(body.saml?.certificates[0]?.fingerprint).toMatch(/^[0-9A-F:]{95}$/);
    expect(body.saml?.acsUrl).toEndWith(`/api/auth/sso/saml/${body.id}/acs`);
    const metadata = await call(tenant.owner.headers, "GET", `${PATH}/${body.id}/saml-metadata`);
    expect(await metadata.text()).toContain(body.saml?.spEntityId ?? "?");

    const fromUrl = await call(tenant.owner.headers, "POST", PATH, {
      type: "saml",
      metadataUrl: `${idp.url}/metadata`,
      enabled: false,
    });
    expect(fromUrl.status).toBe(201);
    expect(((await fromUrl.json()) as ConnectionBody).saml?.idpEntityId).toBe(idp.entityId);
  });

  test("unusable metadata is a 422 naming the field and what is wrong", async () => {
    const refusal = async (body: Record<string, string>) => {
      const res = await call(tenant.owner.headers, "POST", PATH, { type: "saml", ...body });
      expect(res.status).toBe(422);
      return ((await res.json()) as { errors: { path: string; message: string }[] }).errors[0];
    };
    // what the document's pattern states is a 400; metadata that meets it but is not well-formed XML a 422
    const notMetadata = await call(tenant.owner.headers, "POST", PATH, {
      type: "saml",
      metadataXml: "not xml",
    });
    expect(notMetadata.status).toBe(400);
    expect(JSON.stringify(await notMetadata.json())).toContain("metadataXml");
    expect(await refusal({ metadataXml: `${idp.metadataXml}<unclosed` })).toMatchObject({
      path: "metadataXml",
    });
    // a certificate for encryption only: no signing certificate
    const noCert = idp.metadataXml.replace(
      /<(\w+:)?KeyDescriptor[^>]*>/,
      '<$1KeyDescriptor use="encryption">',
    );
    expect((await refusal({ metadataXml: noCert }))?.message).toContain("signing certificate");
    expect(await refusal({ metadataUrl: `${idp.url}/nothing-here` })).toMatchObject({
      path: "metadataUrl",
      message: "answered HTTP 404",
    });
    // both at once is not a body the document allows
    const both = await call(tenant.owner.headers, "POST", PATH, {
      type: "saml",
      metadataXml: idp.metadataXml,
      metadataUrl: `${idp.url}/metadata`,
    });
    expect(both.status).toBe(400);
  });
});

describe("who may", () => {
  test("a member is refused (403); another tenant's connection is 404; a free plan gets 402", async () => {
    await clear(tenant);
    const created = (await (
      await call(tenant.owner.headers, "POST", PATH, oidcBody())
    ).json()) as ConnectionBody;
    expect((await call(tenant.member.headers, "GET", PATH)).status).toBe(403);
    expect((await call(tenant.member.headers, "POST", PATH, oidcBody())).status).toBe(403);
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const)
      expect((await call(other.owner.headers, method, `${PATH}/${created.id}`, body)).status).toBe(404);
    const free = await signedInTenant(t);
    const gated = await call(free.owner.headers, "POST", PATH, oidcBody());
    expect(gated.status).toBe(402);
    expect(((await gated.json()) as { code: string }).code).toBe("payment_required");
  });

  test("a user with a second factor must have proved it recently (step-up) to create, change or delete", async () => {
    await clear(other);
    const created = (await (
      await call(other.owner.headers, "POST", PATH, oidcBody())
    ).json()) as ConnectionBody;
    await t.db.insert(totpFactors).values({
      userId: other.admin.id,
      secretKeyId: "k",
      secretNonce: "n",
      secretCiphertext: "c",
      confirmedAt: new Date(),
    });
    for (const [method, path, body] of [
      ["POST", PATH, oidcBody()],
      ["PATCH", `${PATH}/${created.id}`, { name: "x" }],
      ["DELETE", `${PATH}/${created.id}`, undefined],
    ] as const) {
      const res = await call(other.admin.headers, method, path, body);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe("step_up_required");
    }
    // reading needs no step-up
    expect((await call(other.admin.headers, "GET", `${PATH}/${created.id}`)).status).toBe(200);
  });
});

describe("the provider guard (SSRF)", () => {
  const guarded = () => ({
    ...t.deps,
    config: {
      ...t.deps.config,
      settings: {
        ...t.deps.config.settings,
        Sso: { ...t.deps.config.settings.Sso, AllowPrivateProviders: false },
      },
    },
  });
  const refusal = async (deps: typeof t.deps, issuer: string) => {
    try {
      await checkOidcIssuer(deps, issuer);
    } catch (error) {
      if (error instanceof AppError) return { code: error.code, message: error.fields?.[0]?.message ?? "" };
    }
    return null;
  };

  test("an issuer on a loopback, private or link-local address is refused, literal or resolved, without Sso:AllowPrivateProviders", async () => {
    const deps = guarded();
    expect(await refusal(deps, peer.issuer)).toMatchObject({
      code: "unprocessable",
      message: expect.stringMatching(/^loopback:/),
    });
    expect(await refusal(deps, "http://169.254.169.254/")).toMatchObject({
      message: expect.stringMatching(/^metadata:/),
    });
    expect(await refusal(deps, "http://[::1]:8080/")).toMatchObject({
      message: expect.stringMatching(/^loopback:/),
    });
    // a name is judged by what it resolves to
    const resolving = (address: string) => ({
      ...deps,
      hostResolver: async () => [{ address, family: 4 as const }],
    });
    expect(await refusal(resolving("10.1.2.3"), "http://idp.corp.example/")).toMatchObject({
      message: expect.stringMatching(/^private:/),
    });
    expect(
      await refusal(resolving("127.0.0.1"), `http://idp.corp.example:${new URL(peer.issuer).port}`),
    ).toMatchObject({
      message: expect.stringMatching(/^loopback:/),
    });
    expect(await refusal(resolving("169.254.10.10"), "http://idp.corp.example/")).toMatchObject({
      message: expect.stringMatching(/^link_local:/),
    });
  });

  test("the same issuer passes with Sso:AllowPrivateProviders (the development and test allowance)", async () => {
    expect(await checkOidcIssuer(t.deps, peer.issuer)).toBe(peer.issuer);
  });

  test("a metadata URL on a private address is refused the same way", async () => {
    const { samlSettingsFrom } = await import("../../src/sso/saml/saml-settings.ts");
    try {
      await samlSettingsFrom(guarded(), { metadataUrl: `${idp.url}/metadata` });
      throw new Error("accepted");
    } catch (error) {
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).fields?.[0]).toMatchObject({
        path: "metadataUrl",
        message: expect.stringMatching(/^loopback:/),
      });
    }
  });
});
