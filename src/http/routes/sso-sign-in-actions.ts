import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `ssoSignInArea` declares (sso-sign-in.ts): docs/audit.md's rows for them. */
export const SSO_SIGN_IN_ACTIONS = {
  "sso.user_provisioned": {
    what: "A member was created just in time by a single sign-on.",
    target: "`user`",
    details: "`connectionId`, `role`, `email`",
    writtenBy: "`provisionSsoMember` (actor: anonymous, the sign-in's request)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
