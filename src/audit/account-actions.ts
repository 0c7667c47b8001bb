import type { ActionRow } from "./action-row.ts";

/** The actions of a user's own account and a tenant's sign-in settings (docs/auth.md), part of ACTIONS. */
export const ACCOUNT_ACTIONS = {
  "user.email_change_requested": {
    what: "A user asked to change their address; a link went to the new one, a notice to the current one.",
    target: "`user`",
    details: "—",
    writtenBy: "`requestEmailChange` (POST /api/auth/email/change), in the chain of the session's tenant",
  },
  "user.email_changed": {
    what: "A user's address changed, confirmed with the link sent to the new address.",
    target: "`user`",
    details: "`from`, `to` (the addresses)",
    writtenBy: "`confirmEmailChange` (POST /api/auth/email/change/confirm)",
  },
  "tenant.settings_changed": {
    what: "A tenant's sign-in settings changed (`privateIdentities`, `emailSignIn`).",
    target: "`tenant`",
    details: "`changed` (the names), and each changed setting's new value",
    writtenBy:
      "`updateTenantSettings` (PATCH /api/tenant/settings, PATCH /api/admin/tenants/{tenantId}/settings)",
  },
} as const satisfies Record<string, ActionRow>;
