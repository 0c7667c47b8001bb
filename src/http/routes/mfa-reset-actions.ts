import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `mfaResetArea` declares (mfa-reset.ts): docs/audit.md's rows for them. */
export const MFA_RESET_ACTIONS = {
  "mfa.reset": {
    what: "An owner, admin or platform admin removed every second factor of a member (recovery); the member is e-mailed.",
    target: "`user`",
    details: "`removed` (the kinds removed)",
    writtenBy: "`resetMemberFactors` (auth/mfa-reset.ts)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
