import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `authRecoveryArea` declares (auth-recovery.ts): docs/audit.md's rows for them. */
export const AUTH_RECOVERY_ACTIONS = {
  "auth.password_reset_requested": {
    what: "A password reset link was e-mailed to a user (an address without an account records nothing).",
    target: "`user`",
    details: "—",
    writtenBy: "`requestPasswordReset` (in the background, actor anonymous)",
  },
  "auth.password_reset": {
    what: "A user set a new password with a reset link (every session of theirs ends).",
    target: "`user`",
    details: "—",
    writtenBy: "`resetPassword` (actor anonymous: the link is the credential)",
  },
  "auth.email_verified": {
    what: "A user proved their address with a verification link.",
    target: "`user`",
    details: "—",
    writtenBy: "`verifyEmail`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
