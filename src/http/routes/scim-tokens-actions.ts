import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `scimTokensArea` declares (scim-tokens.ts): docs/audit.md's rows for them. */
export const SCIM_TOKENS_ACTIONS = {
  "scim_token.created": {
    what: "A tenant owner created a SCIM token.",
    target: "`scim_token`",
    details: "`name`, `prefix`",
    writtenBy: "`createScimToken`",
  },
  "scim_token.revoked": {
    what: "A tenant owner deleted a SCIM token.",
    target: "`scim_token`",
    details: "`name`, `prefix`",
    writtenBy: "`deleteScimToken`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
