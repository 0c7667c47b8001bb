import { type CacheProvider, SAML, ValidateInResponseTo } from "@node-saml/node-saml";
import type { Settings } from "../../config/schema.ts";
import { publicBaseUrl } from "../../email/links.ts";

/** How far the IdP's clock may be from ours when NotBefore / NotOnOrAfter are checked. */
export const SAML_CLOCK_SKEW_MS = 2 * 60_000;
/** How long an AuthnRequest waits for its answer (the person signs in at the IdP meanwhile). */
export const SAML_REQUEST_LIFETIME_MS = 10 * 60_000;
/** Replays are remembered at least this long, also for an assertion with a very short NotOnOrAfter. */
export const SAML_MIN_REPLAY_MEMORY_MS = 10 * 60_000;

/** Assertion attribute names of the e-mail, name and groups (docs/sso.md, "Attribute mapping"). */
export interface SamlAttributeMapping {
  email: string;
  name: string;
  groups: string;
}

export const DEFAULT_ATTRIBUTE_MAPPING: SamlAttributeMapping = {
  email: "email",
  name: "name",
  groups: "groups",
};

/** What a SAML connection keeps of its IdP's metadata (the connection's type-specific settings). */
export interface SamlSettings {
  /** The IdP's `entityID`: the only `Issuer` accepted. */
  idpEntityId: string;
  /** The IdP's `SingleSignOnService` (HTTP-Redirect binding) the AuthnRequest goes to. */
  idpSsoUrl: string;
  /** The IdP's signing certificates (PEM): a response or assertion must be signed by one. */
  idpCertificates: string[];
  /** Where the metadata was read from, when it was given as a URL. */
  metadataUrl: string | null;
}

/** A SAML connection as the SAML module needs it. */
export interface SamlConnection {
  id: string;
  tenantId: string;
  settings: SamlSettings;
  attributeMapping: SamlAttributeMapping;
}

/** This connection's service provider: its entity id (the audience) and its ACS URL (the recipient). */
export interface ServiceProvider {
  entityId: string;
  acsUrl: string;
}

export const ACS_PATH = (connectionId: string) => `/api/auth/sso/saml/${connectionId}/acs`;

/** `Server:PublicBaseUrl` + `/api/auth/sso/saml/{id}` (entity id) and `…/acs`: one SP per connection. */
export function serviceProviderOf(settings: Pick<Settings, "Server">, connectionId: string): ServiceProvider {
  const base = publicBaseUrl(settings);
  return {
    entityId: `${base}/api/auth/sso/saml/${connectionId}`,
    acsUrl: `${base}${ACS_PATH(connectionId)}`,
  };
}

/**
 * node-saml configured for one connection: signed responses or assertions (either) by the IdP's
 * certificates, its entity id as the only issuer, our entity id as the audience, InResponseTo always
 * required (no IdP-initiated sign-in) and answered from `requests`. Validity windows are left to
 * `checkSamlResponse` (Plinth's clock).
 */
export function samlFor(
  connection: SamlConnection,
  sp: ServiceProvider,
  requests: CacheProvider,
  requestId?: string,
): SAML {
  return new SAML({
    idpCert: connection.settings.idpCertificates,
    idpIssuer: connection.settings.idpEntityId,
    entryPoint: connection.settings.idpSsoUrl,
    issuer: sp.entityId,
    audience: sp.entityId,
    callbackUrl: sp.acsUrl,
    wantAssertionsSigned: false,
    wantAuthnResponseSigned: false,
    // -1: node-saml judges no NotBefore / NotOnOrAfter (by the process's time); checkSamlResponse
    // judges them by Plinth's clock, with SAML_CLOCK_SKEW_MS
    acceptedClockSkewMs: -1,
    validateInResponseTo: ValidateInResponseTo.always,
    requestIdExpirationPeriodMs: SAML_REQUEST_LIFETIME_MS,
    cacheProvider: requests,
    identifierFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
    disableRequestedAuthnContext: true,
    ...(requestId ? { generateUniqueId: () => requestId } : {}),
  });
}
