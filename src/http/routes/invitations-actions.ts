import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `invitationsArea` declares (invitations.ts): docs/audit.md's rows for them. */
export const INVITATIONS_ACTIONS = {
  "invitation.created": {
    what: "An address was invited into the tenant with a role (its link mailed).",
    target: "`invitation`",
    details: "`email`, `role`",
    writtenBy: "`createInvitation` (tenant owners/admins)",
  },
  "invitation.resent": {
    what: "An invitation was mailed again with a new link (the old one stops working).",
    target: "`invitation`",
    details: "`email`",
    writtenBy: "`resendInvitation`",
  },
  "invitation.revoked": {
    what: "An invitation was revoked (its link stops working).",
    target: "`invitation`",
    details: "`email`",
    writtenBy: "`revokeInvitation`",
  },
  "invitation.accepted": {
    what: "An invitee accepted: a membership with the invited role (actor: the invitee).",
    target: "`invitation`",
    details: "`role`, `identity` (`existing`: a shared sign-in joined; `new`: an account created)",
    writtenBy: "`acceptInvitation` (POST /api/auth/invitations/accept)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
