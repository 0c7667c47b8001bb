import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `impersonationsArea` declares (admin-impersonations.ts): docs/audit.md's rows for them. */
export const IMPERSONATIONS_ACTIONS = {
  "auth.impersonation_started": {
    what: "A platform admin started a session as a tenant user (written in the tenant's chain and the platform's).",
    target: "`user`",
    details: "`reason`, `expiresAt`, `sessions` (the new session's id)",
    writtenBy: "`startImpersonation`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
