import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `ssoSetupLinksArea` declares (sso-setup-links.ts): docs/audit.md's rows for them. */
export const SSO_SETUP_LINKS_ACTIONS = {
  "sso_setup_link.created": {
    what: "A platform admin made an SSO set-up link for the tenant (the token is never recorded).",
    target: "`sso_setup_link`",
    details: "`expiresAt`, `expiresInHours`",
    writtenBy: "`createSsoSetupLink` (POST /api/admin/tenants/{tenantId}/sso/setup-links)",
  },
  "sso_setup_link.opened": {
    what: "An owner of the tenant opened an SSO set-up link in the console.",
    target: "`sso_setup_link`",
    details: "`first` (true: its first opening, which `openedAt` records)",
    writtenBy: "`openSsoSetupLink` (GET /console/sso/setup/{token})",
  },
  "sso_setup_link.revoked": {
    what: "A platform admin revoked an SSO set-up link.",
    target: "`sso_setup_link`",
    details: "`expiresAt`",
    writtenBy: "`revokeSsoSetupLink` (DELETE /api/admin/tenants/{tenantId}/sso/setup-links/{linkId})",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
