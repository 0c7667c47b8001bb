import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `sessionsArea` declares (auth-sessions.ts): docs/audit.md's rows for them. */
export const SESSIONS_ACTIONS = {
  "auth.session_ended": {
    what: "A session was ended by its user, by a tenant owner or admin, or by a platform admin.",
    target: "`session`",
    details: "`reason`, `userId` (the session's user)",
    writtenBy: "`endUserSession`, `endOtherUserSessions`, `endMemberSessions`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
