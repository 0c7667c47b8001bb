import { AppError } from "../../errors.ts";
import { NotXml, parseXml, selectElements, type XmlElement } from "./saml-xml.ts";

/** What Plinth takes from an identity provider's SAML metadata. */
export interface IdpMetadata {
  entityId: string;
  /** The `SingleSignOnService` of the HTTP-Redirect binding (the AuthnRequest goes there). */
  ssoUrl: string;
  /** Signing certificates as PEM (a `KeyDescriptor` with `use="signing"` or no `use`). */
  certificates: string[];
}

const REDIRECT_BINDING = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect";
/** Metadata larger than this is refused (a real IdP's is a few kilobytes). */
export const MAX_METADATA_BYTES = 256 * 1024;

const refused = (field: string, message: string) =>
  new AppError("unprocessable", "The identity provider's metadata is not usable.", {
    fields: [{ path: field, message }],
  });

/** A base64 certificate body (whitespace anywhere) as a PEM block of 64-character lines. */
export function certificatePem(body: string): string {
  const base64 = body.replace(/\s+/g, "");
  const lines = base64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join("\n")}\n-----END CERTIFICATE-----`;
}

/**
 * Reads an `EntityDescriptor` with an `IDPSSODescriptor` (an `EntitiesDescriptor` holding exactly one
 * is accepted too). Refuses, naming `field`, metadata without an entity id, a redirect-binding single
 * sign-on URL over https (http only when `allowHttp`) or a signing certificate. No DTD is expanded:
 * a document with a DOCTYPE is refused outright.
 */
export async function parseIdpMetadata(
  xml: string,
  field: string,
  options: { allowHttp: boolean },
): Promise<IdpMetadata> {
  if (xml.length > MAX_METADATA_BYTES) throw refused(field, `larger than ${MAX_METADATA_BYTES} bytes`);
  let document: Awaited<ReturnType<typeof parseXml>>;
  try {
    document = await parseXml(xml);
  } catch (error) {
    if (error instanceof NotXml) throw refused(field, error.message);
    throw error;
  }
  const elements = selectElements;
  const descriptors = elements(
    document,
    "//*[local-name()='EntityDescriptor'][*[local-name()='IDPSSODescriptor']]",
  );
  if (descriptors.length !== 1)
    throw refused(field, "expected one EntityDescriptor with an IDPSSODescriptor");
  const descriptor = descriptors[0] as XmlElement;
  const entityId = descriptor.getAttribute("entityID")?.trim();
  if (!entityId) throw refused(field, "the EntityDescriptor has no entityID");
  const idp = elements(descriptor, "./*[local-name()='IDPSSODescriptor']")[0] as XmlElement;
  const sso = elements(idp, "./*[local-name()='SingleSignOnService']").find(
    (service) => service.getAttribute("Binding") === REDIRECT_BINDING,
  );
  const ssoUrl = sso?.getAttribute("Location")?.trim();
  if (!ssoUrl) throw refused(field, "no SingleSignOnService with the HTTP-Redirect binding");
  let parsed: URL;
  try {
    parsed = new URL(ssoUrl);
  } catch {
    throw refused(field, "the SingleSignOnService Location is not an absolute URL");
  }
  if (parsed.protocol !== "https:" && !(options.allowHttp && parsed.protocol === "http:"))
    throw refused(field, "the SingleSignOnService Location must use https");
  const certificates = elements(idp, "./*[local-name()='KeyDescriptor']")
    .filter((key) => {
      const use = key.getAttribute("use");
      return !use || use === "signing";
    })
    .flatMap((key) => elements(key, ".//*[local-name()='X509Certificate']"))
    .map((cert) => cert.textContent ?? "")
    .filter((body) => /^[A-Za-z0-9+/=\s]+$/.test(body) && body.trim().length > 0)
    .map(certificatePem);
  if (certificates.length === 0)
    throw refused(field, "no signing certificate (KeyDescriptor X509Certificate)");
  return { entityId, ssoUrl, certificates: [...new Set(certificates)] };
}
