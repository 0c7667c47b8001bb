import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `providersArea` declares (admin-providers.ts): docs/audit.md's rows for them. */
export const PROVIDERS_ACTIONS = {
  "provider.set": {
    what: "A tenant's external provider was configured.",
    target: "`provider` (type)",
    details: "`kind` (the type), `provider`, `status`",
    writtenBy: "`putTenantProvider`",
  },
  "provider.disabled": {
    what: "A tenant's external provider was disabled.",
    target: "`provider` (type)",
    details: "`kind`, `status`",
    writtenBy: "`updateTenantProviderStatus`",
  },
  "provider.enabled": {
    what: "A tenant's external provider was enabled again.",
    target: "`provider` (type)",
    details: "`kind`, `status`",
    writtenBy: "`updateTenantProviderStatus`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
