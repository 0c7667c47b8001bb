import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `signUpArea` declares (sign-up.ts): docs/audit.md's rows for them. */
export const SIGN_UP_ACTIONS = {
  "tenant.signed_up": {
    what: "A tenant was made by self-serve sign-up, its verified address its owner (actor: anonymous, the link).",
    target: "`tenant`",
    details:
      "`code`, `ownerId`, `identity` (`existing`: a shared sign-in owns it; `new`: an account created)",
    writtenBy: "`completeSignUp` (POST /api/auth/signup/verify)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
