import { z } from "zod";
import { AppError } from "../../errors.ts";
import type { SsoConnectionRow, SsoConnectionType } from "../connection-types.ts";
import {
  DEFAULT_ATTRIBUTE_MAPPING,
  type SamlConnection,
  type SamlSettings,
  serviceProviderOf,
} from "./saml-service-provider.ts";
import { startSamlRequest } from "./saml-settings.ts";

const samlSettings = z.object({
  idpEntityId: z.string().min(1),
  idpSsoUrl: z.string().min(1),
  idpCertificates: z.array(z.string().min(1)).min(1),
  metadataUrl: z.string().nullable().default(null),
});

/** A `saml` row of `sso_connections` as the SAML module reads it: its settings, its attribute names. */
export function samlConnectionOf(row: SsoConnectionRow): SamlConnection {
  const parsed = samlSettings.safeParse(row.settings);
  if (row.type !== "saml" || !parsed.success)
    throw new AppError("unavailable", "This SAML connection has no usable IdP metadata: import it again.");
  const settings: SamlSettings = parsed.data;
  return {
    id: row.id,
    tenantId: row.tenantId,
    settings,
    attributeMapping: { ...DEFAULT_ATTRIBUTE_MAPPING, ...row.claimMapping },
  };
}

/**
 * SAML 2.0 (docs/sso.md, "SAML"): an AuthnRequest by the HTTP-Redirect binding with the attempt's
 * `state` as RelayState; its `ID` is kept with the attempt for `InResponseTo`. The callback is the
 * ACS, `completeSamlSignIn` (saml-acs.ts).
 */
export const samlConnectionType: SsoConnectionType = {
  async start(deps, _ctx, { connection, state }) {
    const saml = samlConnectionOf(connection);
    const { redirectUrl, requestId } = await startSamlRequest(
      saml,
      serviceProviderOf(deps.config.settings, connection.id),
      state,
    );
    return { redirectUrl, data: { requestId } };
  },
};
