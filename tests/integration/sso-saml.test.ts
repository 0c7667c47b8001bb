import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { inflateRawSync } from "node:zlib";
import { and, eq } from "drizzle-orm";
import { systemCtx } from "../../src/context.ts";
import { auditEvents, ssoConnections, tenantEmailDomains, users } from "../../src/db/schema/index.ts";
import type { AppError } from "../../src/errors.ts";
import { newBrowserBinding } from "../../src/sso/browser-binding.ts";
import { startSsoSignIn } from "../../src/sso/discover.ts";
import { samlSettingsFrom } from "../../src/sso/saml/saml-settings.ts";
import { json, type SignedInTenant, signedInTenant } from "../helpers/identity.ts";
import { base64, type ResponseOptions, startSamlIdp, type TestIdp } from "../helpers/saml-idp.ts";
import { useSsoStage } from "../helpers/sso-stage.ts";

/**
 * SAML single sign-on end to end: a SAML IdP run by the test with keys of its own (made at test
 * time), the browser leg in Chromium (AuthnRequest by redirect, the IdP's auto-posted Response to
 * the ACS, the 303 to returnTo with a code, the exchange into a session), and forged responses
 * POSTed to the ACS directly, each refused and audited naming the check (docs/sso.md, "SAML").
 */

let idp: TestIdp;
// the test IdP's metadata URL is on the loopback address
const stage = useSsoStage({ "Sso:AllowPrivateProviders": "true" });
const { t, appOrigin, base } = stage;
let tenant: SignedInTenant;
let other: SignedInTenant;
let third: SignedInTenant;

beforeAll(async () => {
  idp = startSamlIdp();
  tenant = await signedInTenant(t, { plan: "enterprise" });
  other = await signedInTenant(t, { plan: "enterprise" });
  third = await signedInTenant(t, { plan: "enterprise" });
}, 60_000);
afterAll(() => idp?.stop());

// the x: eight hex digits alone may spell an IP address (0a7a3a72 is 10.122.58.114), which the
// hostname rules refuse as a wildcard-DNS name, one domain in ~80
const uniqueDomain = () => `corp-${crypto.randomUUID().slice(0, 8)}x.example`;

/** Tenant `tenantId` holds `domain` verified and an active SAML connection made from the IdP's metadata. */
async function samlTenant(tenantId: string, domain: string) {
  const db = t.db;
  await db
    .insert(tenantEmailDomains)
    .values({ tenantId, domain, status: "verified", verificationToken: "x" });
  const settings = await samlSettingsFrom(t.deps, { metadataXml: idp.metadataXml });
  const [connection] = await db
    .insert(ssoConnections)
    .values({ tenantId, type: "saml", settings: { ...settings }, groupRoles: { "plinth-admins": "admin" } })
    .returning();
  if (!connection) throw new Error("no connection");
  return connection;
}

const discover = (email: string) =>
  t.request("/api/auth/sso/discover", json({ email, returnTo: `${appOrigin()}/done` }));

/** A started sign-in: the AuthnRequest's ID and the RelayState, as the IdP would read them. */
async function started(email: string) {
  const res = await discover(email);
  expect(res.status).toBe(200);
  // the browser-binding cookie discover sets: the ACS accepts the response only with it
  const cookie = /__Host-plinth_sso_saml=[^;]+/.exec(res.headers.get("set-cookie") ?? "")?.[0] ?? "";
  expect(cookie).not.toBe("");
  const { redirectUrl } = (await res.json()) as { redirectUrl: string };
  const url = new URL(redirectUrl);
  const request = inflateRawSync(Buffer.from(url.searchParams.get("SAMLRequest") ?? "", "base64")).toString();
  return {
    redirectUrl,
    requestId: /\bID="([^"]+)"/.exec(request)?.[1] ?? "",
    relayState: url.searchParams.get("RelayState") ?? "",
    request,
    cookie,
  };
}

const postAcs = (connectionId: string, fields: Record<string, string>, cookie = "") =>
  t.request(`/api/auth/sso/saml/${connectionId}/acs`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: idp.url, cookie },
    body: new URLSearchParams(fields).toString(),
  });

async function lastFailure(tenantId: string) {
  const rows = await t.db
    .select()
    .from(auditEvents)
    .where(
      and(
        eq(auditEvents.tenantId, tenantId),
        eq(auditEvents.action, "auth.sign_in"),
        eq(auditEvents.outcome, "failure"),
      ),
    );
  return rows.at(-1);
}

describe("SAML sign-in", () => {
  test("through the browser: AuthnRequest, the IdP's signed response to the ACS, the code, a session", async () => {
    const domain = uniqueDomain();
    const connection = await samlTenant(tenant.id, domain);
    const email = `ada@${domain}`;
    idp.user = { email, name: "Ada Lovelace", groups: ["plinth-admins", "other"] };
    const { redirectUrl, request } = await started(email);
    expect(redirectUrl.startsWith(`${idp.url}/sso?`)).toBe(true);
    expect(request).toContain(
      `AssertionConsumerServiceURL="${base()}/api/auth/sso/saml/${connection.id}/acs"`,
    );
    expect(request).toContain(`${base()}/api/auth/sso/saml/${connection.id}</saml:Issuer>`);

    const context = await stage.browser().newContext();
    const page = await context.newPage();
    // the browser itself calls discover (an app on the API's origin), so it holds the binding cookie
    await page.goto(`${base()}/api/health`);
    const inBrowser = await page.evaluate(
      async ([email, returnTo]) =>
        (await (
          await fetch("/api/auth/sso/discover", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ email, returnTo }),
          })
        ).json()) as { redirectUrl: string },
      [email, `${appOrigin()}/done`],
    );
    expect(new URL(inBrowser.redirectUrl).origin).toBe(new URL(redirectUrl).origin);
    await Promise.all([
      page.waitForURL((url) => url.origin === appOrigin()),
      page.goto(inBrowser.redirectUrl),
    ]);
    const back = new URL(page.url());
    await context.close();
    expect(back.pathname).toBe("/done");
    const code = back.searchParams.get("code");
    expect(code).toBeTruthy();

    const exchanged = await t.request("/api/auth/sso/exchange", json({ code }));
    expect(exchanged.status).toBe(200);
    const pair = (await exchanged.json()) as { accessToken: string };
    const me = await t.request("/api/auth/me", { headers: { authorization: `Bearer ${pair.accessToken}` } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({
      user: { email, name: "Ada Lovelace" },
      tenant: { id: tenant.id },
      roles: ["admin"],
    });
  }, 60_000);

  test("the SP metadata names this connection's entity id and ACS; another tenant's connection is 404", async () => {
    const connection = await samlTenant(other.id, uniqueDomain());
    const res = await t.request(`/api/tenant/sso/connections/${connection.id}/saml-metadata`, {
      headers: other.owner.headers,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/samlmetadata+xml");
    const xml = await res.text();
    expect(xml).toContain(`entityID="${base()}/api/auth/sso/saml/${connection.id}"`);
    expect(xml).toContain(`Location="${base()}/api/auth/sso/saml/${connection.id}/acs"`);
    const foreign = await t.request(`/api/tenant/sso/connections/${connection.id}/saml-metadata`, {
      headers: tenant.owner.headers,
    });
    expect(foreign.status).toBe(404);
  });
});

describe("forged responses POSTed to the ACS", () => {
  let connectionId = "";
  let domain = "";
  beforeAll(async () => {
    domain = uniqueDomain();
    connectionId = (await samlTenant(third.id, domain)).id;
  });
  const sp = () => ({
    acsUrl: `${base()}/api/auth/sso/saml/${connectionId}/acs`,
    audience: `${base()}/api/auth/sso/saml/${connectionId}`,
  });

  /** Starts a sign-in, POSTs the response `extra` shapes, and expects the refusal naming `check`. */
  async function refused(
    extra: Partial<ResponseOptions>,
    check: string,
    words: RegExp,
    mutate = (x: string) => x,
  ) {
    const email = `eve@${domain}`;
    const s = await started(email);
    const xml = mutate(idp.response({ inResponseTo: s.requestId, ...sp(), user: { email }, ...extra }));
    const res = await postAcs(
      connectionId,
      { SAMLResponse: base64(xml), RelayState: s.relayState },
      s.cookie,
    );
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get("location") ?? "");
    expect(location.searchParams.get("error")).toBe("sso_failed");
    expect(location.searchParams.get("code")).toBeNull();
    const row = await lastFailure(third.id);
    expect(row?.details).toMatchObject({ check });
    expect(String((row?.details as { reason?: string })?.reason)).toMatch(words);
  }

  test("tampered", () =>
    refused({ user: { email: `mallory@${domain}` } }, "signature", /does not verify/, (x) =>
      x.replaceAll(`mallory@${domain}`, `eve@${domain}`),
    ));
  test("unsigned", () => refused({ sign: "none" }, "signature", /unsigned assertion/));
  test("expired", () =>
    refused({ notBeforeMs: -20 * 60_000, notOnOrAfterMs: -10 * 60_000 }, "clock", /clock skew/));
  test("wrong audience", () =>
    refused({ audience: "https://other.example/sp" }, "audience", /wrong audience/));
  test("signature-wrapped", () =>
    refused({ user: { email: `mallory@${domain}` } }, "structure", /signature wrapping/, (x) => {
      const forged = idp
        .response({ inResponseTo: "_x", ...sp(), user: { email: `eve@${domain}` }, sign: "none" })
        .match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)?.[0];
      return x.replace("</samlp:Status>", `</samlp:Status>${forged}`);
    }));

  test("replayed: the same POST again is refused and audited", async () => {
    const email = `eve@${domain}`;
    const s = await started(email);
    const body = {
      SAMLResponse: base64(idp.response({ inResponseTo: s.requestId, ...sp(), user: { email } })),
      RelayState: s.relayState,
    };
    const first = await postAcs(connectionId, body, s.cookie);
    expect(first.status).toBe(303);
    expect(new URL(first.headers.get("location") ?? "").searchParams.get("code")).toBeTruthy();
    const again = await postAcs(connectionId, body, s.cookie);
    expect(again.status).toBe(400);
    expect((await lastFailure(third.id))?.details).toMatchObject({ code: "in_response_to" });
  });

  test("an XML comment inside the address does not cut it short to a verified domain", async () => {
    // the attacker's IdP account is mallory@<verified domain>.attacker.example; a parser that read
    // the first text node would take mallory@<verified domain>
    const s = await started(`x@${domain}`);
    const whole = `mallory@${domain}.attacker.example`;
    const signed = idp.response({ inResponseTo: s.requestId, ...sp(), user: { email: whole } });
    const injected = signed.replaceAll(whole, `mallory@${domain}<!---->.attacker.example`);
    const res = await postAcs(
      connectionId,
      { SAMLResponse: base64(injected), RelayState: s.relayState },
      s.cookie,
    );
    expect(res.status).toBe(303);
    expect(new URL(res.headers.get("location") ?? "").searchParams.get("error")).toBe("sso_failed");
    const row = await lastFailure(third.id);
    expect(row?.details).toMatchObject({ check: "email_domain" });
    expect(String((row?.details as { reason?: string } | undefined)?.reason)).toContain(
      `${domain}.attacker.example`,
    );
  });
});

describe("a test sign-in", () => {
  test("reports every check in words: all passed, or the one that failed", async () => {
    const owner = await signedInTenant(t, { plan: "enterprise" });
    const domain = uniqueDomain();
    const connection = await samlTenant(owner.id, domain);
    const ctx = systemCtx("test", owner.id);
    const sp = {
      acsUrl: `${base()}/api/auth/sso/saml/${connection.id}/acs`,
      audience: `${base()}/api/auth/sso/saml/${connection.id}`,
    };
    const email = `grace@${domain}`;
    const run = async (extra: Partial<ResponseOptions>) => {
      const binding = newBrowserBinding();
      const { redirectUrl } = await startSsoSignIn(t.deps, ctx, {
        connection,
        // as the API starts one: the ACS answers the report (the console's names its report page)
        returnTo: "",
        test: true,
        browserBinding: binding.hash,
      });
      const url = new URL(redirectUrl);
      const request = inflateRawSync(
        Buffer.from(url.searchParams.get("SAMLRequest") ?? "", "base64"),
      ).toString();
      const requestId = /\bID="([^"]+)"/.exec(request)?.[1] ?? "";
      const xml = idp.response({
        inResponseTo: requestId,
        ...sp,
        user: { email, groups: ["plinth-admins"] },
        ...extra,
      });
      const res = await postAcs(
        connection.id,
        { SAMLResponse: base64(xml), RelayState: url.searchParams.get("RelayState") ?? "" },
        `__Host-plinth_sso_saml=${binding.value}`,
      );
      expect(res.status).toBe(200);
      return (await res.json()) as {
        ok: boolean;
        checks: { check: string; ok: boolean; detail: string }[];
        profile: unknown;
      };
    };
    const good = await run({});
    expect(good.ok).toBe(true);
    expect(good.checks.map((c) => c.check)).toEqual(
      expect.arrayContaining([
        "browser",
        "signature",
        "audience",
        "clock",
        "recipient",
        "replay",
        "email_domain",
      ]),
    );
    expect(good.checks.every((c) => c.ok)).toBe(true);
    expect(good.profile).toMatchObject({ email, role: "admin" });

    for (const [extra, check, words] of [
      [{ audience: "https://other.example/sp" }, "audience", "wrong audience"],
      [{ notBeforeMs: 10 * 60_000, notOnOrAfterMs: 20 * 60_000 }, "clock", "clock skew"],
      [{ sign: "none" }, "signature", "unsigned assertion"],
    ] as const) {
      const report = await run(extra);
      expect(report.ok).toBe(false);
      expect(report.profile).toBeNull();
      // the browser check passed first (the callback came to the browser that started it)
      expect(report.checks[0]).toMatchObject({ check: "browser", ok: true });
      expect(report.checks[1]).toMatchObject({ check, ok: false });
      expect(report.checks[1]?.detail).toContain(words);
    }
    // nobody was provisioned by a test sign-in
    const [user] = await t.db.select().from(users).where(eq(users.email, email));
    expect(user).toBeUndefined();
  }, 60_000);
});

describe("IdP metadata import", () => {
  test("from the IdP's metadata URL, and refusals naming the field", async () => {
    const settings = await samlSettingsFrom(t.deps, { metadataUrl: `${idp.url}/metadata` });
    expect(settings).toMatchObject({
      idpEntityId: idp.entityId,
      idpSsoUrl: `${idp.url}/sso`,
      metadataUrl: `${idp.url}/metadata`,
    });
    expect(settings.idpCertificates).toHaveLength(1);
    const refusal = async (input: { metadataXml?: string; metadataUrl?: string }) => {
      try {
        await samlSettingsFrom(t.deps, input);
      } catch (error) {
        return error as AppError;
      }
      throw new Error("accepted");
    };
    expect((await refusal({})).fields?.[0]?.path).toBe("metadataXml");
    expect((await refusal({ metadataXml: idp.metadataXml, metadataUrl: "x" })).fields?.[0]?.path).toBe(
      "metadataXml",
    );
    const doctype = await refusal({
      metadataXml: `<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>${idp.metadataXml.replace(/^<\?xml[^>]*>/, "")}`,
    });
    expect(doctype.fields?.[0]).toMatchObject({ path: "metadataXml" });
    const noCert = await refusal({
      metadataXml: idp.metadataXml.replace(/<md:KeyDescriptor[\s\S]*<\/md:KeyDescriptor>/, ""),
    });
    expect(noCert.fields?.[0]?.message).toContain("no signing certificate");
    const badCert = await refusal({
      metadataXml: idp.metadataXml.replace(/<ds:X509Certificate>[^<]+/, "<ds:X509Certificate>QUJD"),
    });
    expect(badCert.fields?.[0]?.message).toContain("not a readable X.509 certificate");
    const missing = await refusal({ metadataUrl: `${idp.url}/nothing-here` });
    expect(missing.fields?.[0]).toMatchObject({ path: "metadataUrl", message: "answered HTTP 404" });
  });
});
