import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock, systemClock } from "../../src/clock.ts";
import { systemCtx, type TenantCtx } from "../../src/context.ts";
import { parseIdpMetadata } from "../../src/sso/saml/saml-metadata.ts";
import { checkSamlResponse, type SentRequest } from "../../src/sso/saml/saml-response.ts";
import {
  DEFAULT_ATTRIBUTE_MAPPING,
  type SamlConnection,
  type ServiceProvider,
} from "../../src/sso/saml/saml-service-provider.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createTenant } from "../helpers/identity.ts";
import {
  base64,
  makeKeyPair,
  type ResponseOptions,
  samlId,
  startSamlIdp,
  type TestIdp,
} from "../helpers/saml-idp.ts";

// The SAML response checks against responses a real signer made (the test IdP's own keys): each
// attack is refused naming the check it failed, in words.
const t = useTestDatabase();
const deps = {
  get database() {
    return t.database;
  },
  clock: systemClock,
};
let idp: TestIdp;
let ctx: TenantCtx;
let connection: SamlConnection;
const connectionId = crypto.randomUUID();
const sp: ServiceProvider = {
  entityId: `https://api.example.test/api/auth/sso/saml/${connectionId}`,
  acsUrl: `https://api.example.test/api/auth/sso/saml/${connectionId}/acs`,
};
const ada = { email: "ada@example.com", name: "Ada Lovelace", groups: ["engineering", "admins"] };

beforeAll(async () => {
  idp = startSamlIdp();
  const tenant = await createTenant(t.database.db);
  ctx = systemCtx("test", tenant.id);
  const metadata = await parseIdpMetadata(idp.metadataXml, "metadataXml", { allowHttp: true });
  connection = {
    id: connectionId,
    tenantId: tenant.id,
    settings: {
      idpEntityId: metadata.entityId,
      idpSsoUrl: metadata.ssoUrl,
      idpCertificates: metadata.certificates,
      metadataUrl: null,
    },
    attributeMapping: DEFAULT_ATTRIBUTE_MAPPING,
  };
});
afterAll(() => idp?.stop());

const sent = (): SentRequest => ({ requestId: samlId(), createdAt: new Date() });
const honest = (request: SentRequest, extra: Partial<ResponseOptions> = {}): ResponseOptions => ({
  inResponseTo: request.requestId,
  acsUrl: sp.acsUrl,
  audience: sp.entityId,
  user: ada,
  ...extra,
});
const check = (xml: string, request: SentRequest | null) =>
  checkSamlResponse(deps, ctx, { connection, sp, samlResponse: base64(xml), request });
/** The first failed check of a response built with `extra`, answering a fresh request. */
async function refusal(extra: Partial<ResponseOptions>) {
  const request = sent();
  const result = await check(idp.response(honest(request, extra)), request);
  expect(result.identity).toBeNull();
  return result.checks[0];
}

describe("accepted", () => {
  test.each(["assertion", "response", "both"] as const)(
    "a response whose %s is signed by the IdP",
    async (sign) => {
      const request = sent();
      const result = await check(idp.response(honest(request, { sign })), request);
      expect(result.checks.filter((c) => !c.ok)).toEqual([]);
      expect(result.identity).toMatchObject({
        email: "ada@example.com",
        name: "Ada Lovelace",
        groups: ["engineering", "admins"],
        nameId: "ada@example.com",
      });
    },
  );

  test("a clock up to the allowed skew apart", async () => {
    const request = sent();
    const early = await check(idp.response(honest(request, { notBeforeMs: 60_000 })), request);
    expect(early.identity?.email).toBe("ada@example.com");
  });
});

describe("refused, each naming the check in words", () => {
  test("unsigned assertion", async () => {
    expect(await refusal({ sign: "none" })).toEqual({
      check: "signature",
      ok: false,
      detail: "unsigned assertion: neither the response nor the assertion is signed",
    });
  });

  test("a tampered assertion (the e-mail changed after signing)", async () => {
    const request = sent();
    const xml = idp
      .response(honest(request, { user: { email: "mallory@example.com" } }))
      .replace(/mallory@example\.com/g, "ada@example.com");
    const result = await check(xml, request);
    expect(result.identity).toBeNull();
    expect(result.checks[0]?.check).toBe("signature");
    expect(result.checks[0]?.detail).toContain("does not verify");
  });

  test("signed by a key that is not in the IdP's metadata", async () => {
    const failed = await refusal({ signer: makeKeyPair("mallory") });
    expect(failed?.check).toBe("signature");
    expect(failed?.detail).toContain("does not verify");
  });

  test("expired", async () => {
    const failed = await refusal({ notBeforeMs: -20 * 60_000, notOnOrAfterMs: -10 * 60_000 });
    expect(failed?.check).toBe("clock");
    expect(failed?.detail).toStartWith("clock skew: the assertion has expired");
  });

  test("not valid yet beyond the skew", async () => {
    const failed = await refusal({ notBeforeMs: 10 * 60_000, notOnOrAfterMs: 20 * 60_000 });
    expect(failed).toMatchObject({ check: "clock" });
    expect(failed?.detail).toContain("clock skew: the assertion is not valid yet");
  });

  test("judged by Plinth's clock, not the process's: ten minutes behind the IdP, an honest response is not valid yet; ten minutes ahead, expired; the request's age by the same clock", async () => {
    const at = (offsetMs: number) => {
      const clock = new ManualClock(Date.now() + offsetMs);
      // the request sent now by that clock
      const request: SentRequest = { requestId: samlId(), createdAt: clock.now() };
      return checkSamlResponse({ ...deps, clock }, ctx, {
        connection,
        sp,
        samlResponse: base64(idp.response(honest(request))),
        request,
      });
    };
    const behind = await at(-10 * 60_000);
    expect(behind.checks[0]).toMatchObject({ check: "clock", ok: false });
    expect(behind.checks[0]?.detail).toContain("clock skew: the assertion is not valid yet");
    const ahead = await at(10 * 60_000);
    expect(ahead.checks[0]).toMatchObject({ check: "clock", ok: false });
    expect(ahead.checks[0]?.detail).toContain("clock skew: the assertion has expired");
    // a minute apart, within the skew: accepted
    expect((await at(-60_000)).identity?.email).toBe("ada@example.com");
  });

  test("wrong audience", async () => {
    const failed = await refusal({ audience: "https://other.example/sp" });
    expect(failed).toMatchObject({ check: "audience" });
    expect(failed?.detail).toStartWith("wrong audience");
  });

  test("wrong recipient", async () => {
    const failed = await refusal({ recipient: "https://evil.example/acs" });
    expect(failed).toMatchObject({ check: "recipient" });
    expect(failed?.detail).toStartWith("wrong recipient");
  });

  test("wrong destination", async () => {
    const failed = await refusal({ destination: "https://evil.example/acs" });
    expect(failed).toMatchObject({ check: "destination" });
    expect(failed?.detail).toStartWith("wrong destination");
  });

  test("wrong issuer", async () => {
    const failed = await refusal({ issuer: "https://evil.example/idp" });
    expect(failed).toMatchObject({ check: "issuer" });
  });

  test("an IdP-initiated response (no InResponseTo) and one answering another request", async () => {
    const request = sent();
    const unsolicited = await check(idp.response(honest(request, { inResponseTo: null })), request);
    expect(unsolicited.checks[0]).toMatchObject({ check: "in_response_to", ok: false });
    const other = await check(idp.response(honest(sent())), request);
    expect(other.checks[0]).toMatchObject({ check: "in_response_to", ok: false });
    const none = await check(idp.response(honest(request)), null);
    expect(none.checks[0]).toMatchObject({ check: "in_response_to", ok: false });
  });

  test("the IdP's own refusal", async () => {
    const failed = await refusal({
      status: "urn:oasis:names:tc:SAML:2.0:status:Requester",
      sign: "response",
    });
    expect(failed).toMatchObject({ check: "status" });
  });

  test("a replayed assertion, even answering a request of its own", async () => {
    const first = sent();
    const assertionId = samlId();
    const xml = idp.response(honest(first, { assertionId }));
    expect((await check(xml, first)).identity?.email).toBe("ada@example.com");
    // the same bytes again (the attempt is spent, so this stands for a store that forgot the request)
    const again = await check(xml, first);
    expect(again.identity).toBeNull();
    expect(again.checks[0]).toEqual({
      check: "replay",
      ok: false,
      detail: "replayed assertion: this assertion id was already used to sign in",
    });
    // a freshly signed response reusing the assertion id for another request
    const second = sent();
    const reused = await check(idp.response(honest(second, { assertionId })), second);
    expect(reused.checks[0]?.check).toBe("replay");
  });
});

describe("signature wrapping", () => {
  test("a forged assertion beside the signed one (two assertions)", async () => {
    const request = sent();
    const signed = idp.response(honest(request, { user: { email: "mallory@example.com" } }));
    const forged = idp
      .response(honest(request, { sign: "none" }))
      .match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)?.[0];
    const wrapped = signed.replace("</samlp:Status>", `</samlp:Status>${forged}`);
    const result = await check(wrapped, request);
    expect(result.identity).toBeNull();
    expect(result.checks[0]?.check).toBe("structure");
    expect(result.checks[0]?.detail).toContain("signature wrapping");
  });

  test("the signed assertion moved into an extension, a forged one in its place", async () => {
    const request = sent();
    const signed = idp.response(honest(request, { user: { email: "mallory@example.com" } }));
    const original = signed.match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)?.[0] ?? "";
    // the forged assertion keeps the signed one's ID and Signature (its digest is of the original)
    const forged = original.replace(/mallory@example\.com/g, "ada@example.com");
    const wrapped = signed.replace(original, `<samlp:Extensions>${original}</samlp:Extensions>${forged}`);
    const result = await check(wrapped, request);
    expect(result.identity).toBeNull();
    expect(result.checks[0]?.check).toMatch(/^(signature|structure)$/);
  });

  test("a signed response whose assertion is swapped for a forged one", async () => {
    const request = sent();
    const signed = idp.response(
      honest(request, { sign: "response", user: { email: "mallory@example.com" } }),
    );
    const wrapped = signed.replace(/mallory@example\.com/g, "ada@example.com");
    const result = await check(wrapped, request);
    expect(result.identity).toBeNull();
    expect(result.checks[0]?.check).toBe("signature");
  });
});

test("an XML comment inside the e-mail does not change the identity", async () => {
  const request = sent();
  const signed = idp.response(honest(request, { user: { email: "user@evil.com.example.com" } }));
  // canonicalization drops comments, so the signature still holds over the commented text
  const injected = signed.replace(/user@evil\.com\.example\.com/g, "user@evil.com<!---->.example.com");
  expect(injected).toContain("<!---->");
  const result = await check(injected, request);
  expect(result.checks.filter((c) => !c.ok)).toEqual([]);
  expect(result.identity?.email).toBe("user@evil.com.example.com");
  expect(result.identity?.nameId).toBe("user@evil.com.example.com");
});

test("a response that is not base64 or not XML, and a DOCTYPE, are refused as format", async () => {
  const request = sent();
  for (const samlResponse of [
    "<not base64>",
    base64("<samlp:Response"),
    base64('<!DOCTYPE x [<!ENTITY a "b">]><x/>'),
  ]) {
    const result = await checkSamlResponse(deps, ctx, { connection, sp, samlResponse, request });
    expect(result.checks[0]).toMatchObject({ check: "format", ok: false });
  }
});
