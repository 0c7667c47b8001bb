import type { ConnectionTypeName, SsoConnectionType } from "./connection-types.ts";
import { oidcConnectionType } from "./oidc/oidc-connection.ts";
import { samlConnectionType } from "./saml/saml-connection-type.ts";

/** Each connection type once (docs/sso.md, "Connection types"); a type without an entry cannot start. */
export const connectionTypes: Partial<Record<ConnectionTypeName, SsoConnectionType>> = {
  oidc: oidcConnectionType,
  saml: samlConnectionType,
};
