import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `scimArea` declares (scim.ts): docs/audit.md's rows for them. */
export const SCIM_ACTIONS = {
  "scim.user_created": {
    what: "The tenant's directory provisioned a member over SCIM (a new identity of the tenant's own pool).",
    target: "`user`",
    details: "`email`, `status` (`Active`, `Disabled`), `role`",
    writtenBy: "`createScimUser` (a SCIM token: actor `system` `scim:<token id>`)",
  },
  "scim.user_updated": {
    what: "The tenant's directory replaced or patched a member's SCIM attributes (deactivating also writes `user.disabled`; deleting writes `user.deleted`).",
    target: "`user`",
    details: "`email`, `status`",
    writtenBy: "`replaceScimUser`, `patchScimUser`",
  },
  "scim.user_reactivated": {
    what: "The tenant's directory set a deactivated member active again.",
    target: "`user`",
    details: "—",
    writtenBy: "`replaceScimUser`, `patchScimUser`",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
