import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `ssoConnectionsArea` declares (sso-connections.ts): docs/audit.md's rows for them. */
export const SSO_CONNECTIONS_ACTIONS = {
  "sso_connection.created": {
    what: "A single sign-on connection was added.",
    target: "`sso_connection`",
    details: "`type`, `status`, `issuer` (OIDC)",
    writtenBy: "`createSsoConnection`",
  },
  "sso_connection.updated": {
    what: "A single sign-on connection was changed (its client secret is never recorded).",
    target: "`sso_connection`",
    details: "`fields` (the names of the fields changed), `status`",
    writtenBy: "`updateSsoConnection`",
  },
  "sso_connection.deleted": {
    what: "A single sign-on connection was removed.",
    target: "`sso_connection`",
    details: "`type`",
    writtenBy: "`deleteSsoConnection`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
