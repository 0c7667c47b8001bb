import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `tenantsArea` declares (admin-tenants.ts): docs/audit.md's rows for them. */
export const TENANTS_ACTIONS = {
  "tenant.created": {
    what: "A tenant was created.",
    target: "`tenant`",
    details: "`code`",
    writtenBy: "`createTenant` (in the new tenant's chain)",
  },
  "tenant.suspended": {
    what: "A tenant was suspended.",
    target: "`tenant`",
    details: "—",
    writtenBy: "`suspendTenant`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
