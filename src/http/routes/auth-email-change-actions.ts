import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `emailChangeArea` declares (auth-email-change.ts): docs/audit.md's rows for them. */
export const EMAIL_CHANGE_ACTIONS = {
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
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
