import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `securityPolicyArea` declares (security-policy.ts): docs/audit.md's rows for them. */
export const SECURITY_POLICY_ACTIONS = {
  "tenant.security_policy_changed": {
    what: "A tenant's second-factor policy changed (`requireMfa`, `enrolmentGraceDays`).",
    target: "`tenant`",
    details: "`before`, `after`",
    writtenBy: "`updateSecurityPolicy` (auth/security-policy.ts; after a fresh second factor)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
