import { randomBytes, X509Certificate } from "node:crypto";
import { generateServiceProviderMetadata } from "@node-saml/node-saml";
import { AppError } from "../../errors.ts";
import { DestinationRefused } from "../../webhooks/destinations.ts";
import { type ProviderFetchDeps, ProviderUnreachable, providerFetch } from "../provider-fetch.ts";
import { MAX_METADATA_BYTES, parseIdpMetadata } from "./saml-metadata.ts";
import {
  type SamlConnection,
  type SamlSettings,
  type ServiceProvider,
  samlFor,
} from "./saml-service-provider.ts";

export type SamlSettingsDeps = ProviderFetchDeps;

/** SHA-256 fingerprint of a PEM certificate (colon-separated hex), or null when Node cannot read it. */
export function certificateFingerprint(pem: string): string | null {
  try {
    return new X509Certificate(pem).fingerprint256;
  } catch {
    return null;
  }
}

/**
 * Reads metadata from `url` through the provider guard (`providerFetch`: public addresses only, https
 * in Production, unless `Sso:AllowPrivateProviders`; no redirects; 10 seconds). 422 naming
 * `metadataUrl` when it gives no metadata; 503 when the IdP cannot be reached.
 */
async function fetchMetadata(deps: SamlSettingsDeps, url: string): Promise<string> {
  const refused = (message: string) =>
    new AppError("unprocessable", "The metadata URL did not give usable metadata.", {
      fields: [{ path: "metadataUrl", message }],
    });
  let response: Response;
  try {
    response = await providerFetch(deps)(url, {
      headers: { accept: "application/samlmetadata+xml, application/xml" },
    });
  } catch (error) {
    if (error instanceof DestinationRefused) throw refused(`${error.rule}: ${error.message}`);
    if (error instanceof TypeError) throw refused("not an absolute URL");
    if (error instanceof ProviderUnreachable)
      throw new AppError("unavailable", `The metadata URL could not be read: ${error.message}.`);
    throw error;
  }
  if (!response.ok) throw refused(`answered HTTP ${response.status}`);
  const body = await response.text();
  if (body.length > MAX_METADATA_BYTES) throw refused(`larger than ${MAX_METADATA_BYTES} bytes`);
  return body;
}

/**
 * A SAML connection's settings from its IdP's metadata, given (`metadataXml`) or read from its URL
 * (`metadataUrl`): exactly one of them. 422 naming the field when the metadata is unusable (no
 * entity id, no HTTP-Redirect single sign-on URL, no readable signing certificate).
 */
export async function samlSettingsFrom(
  deps: SamlSettingsDeps,
  input: { metadataXml?: string; metadataUrl?: string },
): Promise<SamlSettings> {
  if ((input.metadataXml === undefined) === (input.metadataUrl === undefined))
    throw new AppError("validation_failed", "Give the IdP's metadata as metadataXml or metadataUrl.", {
      fields: [{ path: "metadataXml", message: "exactly one of metadataXml and metadataUrl" }],
    });
  const field = input.metadataXml !== undefined ? "metadataXml" : "metadataUrl";
  const xml = input.metadataXml ?? (await fetchMetadata(deps, input.metadataUrl as string));
  const metadata = await parseIdpMetadata(xml, field, {
    allowHttp: deps.config.environment !== "Production",
  });
  if (metadata.certificates.some((pem) => certificateFingerprint(pem) === null))
    throw new AppError("unprocessable", "The identity provider's metadata is not usable.", {
      fields: [{ path: field, message: "a signing certificate is not a readable X.509 certificate" }],
    });
  return {
    idpEntityId: metadata.entityId,
    idpSsoUrl: metadata.ssoUrl,
    idpCertificates: metadata.certificates,
    metadataUrl: input.metadataUrl ?? null,
  };
}

/**
 * Starts a SAML sign-in: an AuthnRequest with a fresh `ID` (kept with the attempt: the response must
 * answer it) to the IdP's single sign-on URL (HTTP-Redirect binding), the attempt's `state` as
 * RelayState (the ACS takes the attempt back by it).
 */
export async function startSamlRequest(
  connection: SamlConnection,
  sp: ServiceProvider,
  state: string,
): Promise<{ redirectUrl: string; requestId: string }> {
  const requestId = `_${randomBytes(20).toString("hex")}`;
  const noStore = { saveAsync: async () => null, getAsync: async () => null, removeAsync: async () => null };
  const redirectUrl = await samlFor(connection, sp, noStore, requestId).getAuthorizeUrlAsync(
    state,
    undefined,
    {},
  );
  return { redirectUrl, requestId };
}

/** The SP metadata to hand the IdP: entity id, ACS URL (HTTP-POST), e-mail NameID, signed assertions wanted. */
export function serviceProviderMetadata(sp: ServiceProvider): string {
  return generateServiceProviderMetadata({
    issuer: sp.entityId,
    callbackUrl: sp.acsUrl,
    identifierFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
    wantAssertionsSigned: true,
  });
}
