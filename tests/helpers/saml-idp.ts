import { generateKeyPairSync, randomBytes } from "node:crypto";
import { inflateRawSync } from "node:zlib";
import { signXml } from "@node-saml/node-saml/lib/xml";
import forge from "node-forge";

/**
 * A SAML identity provider run by the test: its own RSA key and self-signed certificate made at
 * test time, metadata at `/metadata`, and the HTTP-Redirect single sign-on endpoint at `/sso` that
 * answers an AuthnRequest with a signed Response auto-posted (HTTP-POST binding) to the ACS the
 * request names, for `user`. `response()` builds any response a test needs, honest or forged.
 */
export interface SamlUser {
  email: string;
  name?: string;
  groups?: string[];
}

export interface ResponseOptions {
  inResponseTo?: string | null;
  acsUrl: string;
  audience: string;
  user: SamlUser;
  /** NameID (default: the e-mail). */
  nameId?: string;
  issuer?: string;
  /** Defaults: `Destination` and `Recipient` are the ACS URL. */
  destination?: string | null;
  recipient?: string;
  /** Validity window around now: NotBefore = now + notBeforeMs (default -60 s), NotOnOrAfter = now + notOnOrAfterMs (default +5 min). */
  notBeforeMs?: number;
  notOnOrAfterMs?: number;
  /** What is signed: the assertion (default), the response, both or nothing. */
  sign?: "assertion" | "response" | "both" | "none";
  /** Another key pair signs (its certificate is not in the IdP's metadata). */
  signer?: KeyPair;
  assertionId?: string;
  status?: string;
}

export interface KeyPair {
  privateKey: string;
  certificate: string;
}

/** A fresh RSA key and a self-signed certificate for it (no key material is committed). */
export function makeKeyPair(commonName = "plinth-test-idp"): KeyPair {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKey.export({ type: "spki", format: "pem" }).toString());
  cert.serialNumber = `01${randomBytes(8).toString("hex")}`;
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 30 * 86_400_000);
  const attrs = [{ name: "commonName", value: commonName }];
  cert.setSubject(attrs);
  cert.setIssuer(attrs);
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  cert.sign(forge.pki.privateKeyFromPem(pem), forge.md.sha256.create());
  return { privateKey: pem, certificate: forge.pki.certificateToPem(cert) };
}

const certificateBody = (pem: string) => pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
const escapeXml = (value: string) =>
  value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const iso = (ms: number) => new Date(ms).toISOString();
export const samlId = () => `_${randomBytes(16).toString("hex")}`;

const ASSERTION = "//*[local-name(.)='Assertion']";
const RESPONSE = "/*[local-name(.)='Response']";

function sign(xml: string, what: "assertion" | "response", keys: KeyPair): string {
  const target = what === "assertion" ? ASSERTION : RESPONSE;
  return signXml(
    xml,
    target,
    { reference: `${target}/*[local-name(.)='Issuer']`, action: "after" },
    {
      privateKey: keys.privateKey,
      publicCert: keys.certificate,
      signatureAlgorithm: "sha256",
      digestAlgorithm: "sha256",
    },
  );
}

export interface TestIdp {
  url: string;
  entityId: string;
  keys: KeyPair;
  metadataXml: string;
  /** Who the next browser sign-in at `/sso` is (the person "at" the IdP). */
  user: SamlUser;
  /**
   * How the IdP is set up for the browser sign-ins at `/sso` (what its administrator typed): e.g. a
   * wrong `audience` (SP entity id), or `sign: "none"`; empty, an honest IdP.
   */
  setup: Partial<Omit<ResponseOptions, "user">>;
  /** The AuthnRequests `/sso` received: their ID and ACS URL. */
  requests: { id: string; acsUrl: string; issuer: string; relayState: string }[];
  response(options: ResponseOptions): string;
  stop(): void;
}

/** The Response XML (signed as `options.sign` says), not yet base64. */
export function buildResponse(idp: Pick<TestIdp, "entityId" | "keys">, options: ResponseOptions): string {
  const now = Date.now();
  const issuer = escapeXml(options.issuer ?? idp.entityId);
  const irt = options.inResponseTo ? ` InResponseTo="${escapeXml(options.inResponseTo)}"` : "";
  const destination =
    options.destination === null ? "" : ` Destination="${escapeXml(options.destination ?? options.acsUrl)}"`;
  const notBefore = iso(now + (options.notBeforeMs ?? -60_000));
  const notOnOrAfter = iso(now + (options.notOnOrAfterMs ?? 5 * 60_000));
  const user = options.user;
  const attribute = (name: string, values: string[]) =>
    `<saml:Attribute Name="${name}">${values.map((v) => `<saml:AttributeValue>${escapeXml(v)}</saml:AttributeValue>`).join("")}</saml:Attribute>`;
  const assertion =
    `<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${options.assertionId ?? samlId()}" Version="2.0" IssueInstant="${iso(now)}">` +
    `<saml:Issuer>${issuer}</saml:Issuer>` +
    `<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">${escapeXml(options.nameId ?? user.email)}</saml:NameID>` +
    `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData${irt} NotOnOrAfter="${notOnOrAfter}" Recipient="${escapeXml(options.recipient ?? options.acsUrl)}"/></saml:SubjectConfirmation></saml:Subject>` +
    `<saml:Conditions NotBefore="${notBefore}" NotOnOrAfter="${notOnOrAfter}"><saml:AudienceRestriction><saml:Audience>${escapeXml(options.audience)}</saml:Audience></saml:AudienceRestriction></saml:Conditions>` +
    `<saml:AuthnStatement AuthnInstant="${iso(now)}" SessionIndex="${samlId()}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>` +
    `<saml:AttributeStatement>${attribute("email", [user.email])}${user.name ? attribute("name", [user.name]) : ""}${user.groups?.length ? attribute("groups", user.groups) : ""}</saml:AttributeStatement>` +
    `</saml:Assertion>`;
  const status = options.status ?? "urn:oasis:names:tc:SAML:2.0:status:Success";
  let xml =
    `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${samlId()}" Version="2.0" IssueInstant="${iso(now)}"${destination}${irt}>` +
    `<saml:Issuer>${issuer}</saml:Issuer><samlp:Status><samlp:StatusCode Value="${status}"/></samlp:Status>${assertion}</samlp:Response>`;
  const keys = options.signer ?? idp.keys;
  const signing = options.sign ?? "assertion";
  if (signing === "assertion" || signing === "both") xml = sign(xml, "assertion", keys);
  if (signing === "response" || signing === "both") xml = sign(xml, "response", keys);
  return xml;
}

export const base64 = (xml: string) => Buffer.from(xml, "utf8").toString("base64");

/** The IdP's metadata: entity id, the HTTP-Redirect single sign-on URL, the signing certificate. */
export function idpMetadata(entityId: string, ssoUrl: string, certificate: string): string {
  return (
    `<?xml version="1.0"?><md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${escapeXml(entityId)}">` +
    `<md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
    `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${certificateBody(certificate)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>` +
    `<md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>` +
    `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${escapeXml(ssoUrl)}"/>` +
    `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="${escapeXml(ssoUrl)}"/>` +
    `</md:IDPSSODescriptor></md:EntityDescriptor>`
  );
}

/**
 * Starts the IdP on a free loopback port. `host`: the name its URLs use (default 127.0.0.1);
 * `localhost` makes it another site than an app on 127.0.0.1 (its form POST to the ACS is cross-site).
 */
export function startSamlIdp(options: { user?: SamlUser; host?: "127.0.0.1" | "localhost" } = {}): TestIdp {
  const keys = makeKeyPair();
  const requests: TestIdp["requests"] = [];
  const idp: TestIdp = {
    url: "",
    entityId: "",
    keys,
    metadataXml: "",
    user: options.user ?? { email: "ada@example.com", name: "Ada Lovelace", groups: [] },
    requests,
    setup: {},
    response: (o) => buildResponse(idp, o),
    stop: () => server.stop(true),
  };
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      const url = new URL(request.url);
      if (url.pathname === "/metadata")
        return new Response(idp.metadataXml, { headers: { "content-type": "application/samlmetadata+xml" } });
      if (url.pathname !== "/sso") return new Response("not found", { status: 404 });
      const authnRequest = inflateRawSync(
        Buffer.from(url.searchParams.get("SAMLRequest") ?? "", "base64"),
      ).toString();
      const id = /\bID="([^"]+)"/.exec(authnRequest)?.[1] ?? "";
      const acsUrl = /AssertionConsumerServiceURL="([^"]+)"/.exec(authnRequest)?.[1] ?? "";
      const issuer = /<saml:Issuer[^>]*>([^<]+)</.exec(authnRequest)?.[1] ?? "";
      const relayState = url.searchParams.get("RelayState") ?? "";
      requests.push({ id, acsUrl, issuer, relayState });
      const samlResponse = base64(
        idp.response({ inResponseTo: id, acsUrl, audience: issuer, ...idp.setup, user: idp.user }),
      );
      const html =
        `<!doctype html><html><body><form id="f" method="post" action="${escapeXml(acsUrl)}">` +
        `<input type="hidden" name="SAMLResponse" value="${samlResponse}"/>` +
        `<input type="hidden" name="RelayState" value="${escapeXml(relayState)}"/>` +
        `<button type="submit">Continue</button></form><script>document.getElementById("f").submit()</script></body></html>`;
      return new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } });
    },
  });
  idp.url = `http://${options.host ?? "127.0.0.1"}:${server.port}`;
  idp.entityId = `${idp.url}/metadata`;
  idp.metadataXml = idpMetadata(idp.entityId, `${idp.url}/sso`, keys.certificate);
  return idp;
}
