import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `secretsArea` declares (admin-secrets.ts): docs/audit.md's rows for them. */
export const SECRETS_ACTIONS = {
  "tenant_secret.put": {
    what: "A tenant secret was stored.",
    target: "`tenant_secret` (name)",
    details: "`name` (never the value)",
    writtenBy: "`putTenantSecret`",
  },
  "tenant_secret.deleted": {
    what: "A tenant secret was deleted.",
    target: "`tenant_secret` (name)",
    details: "`name`",
    writtenBy: "`deleteTenantSecret`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
