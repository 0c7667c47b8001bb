import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `tenantSettingsArea` declares (tenant-settings.ts): docs/audit.md's rows for them. */
export const TENANT_SETTINGS_ACTIONS = {
  "tenant.settings_changed": {
    what: "A tenant's sign-in settings changed (`privateIdentities`, `emailSignIn`).",
    target: "`tenant`",
    details: "`changed` (the names), and each changed setting's new value",
    writtenBy:
      "`updateTenantSettings` (PATCH /api/tenant/settings, PATCH /api/admin/tenants/{tenantId}/settings)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
