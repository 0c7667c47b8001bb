import type { ActionRow } from "./action-row.ts";

/** The actions of SCIM provisioning (docs/scim.md), part of the trail's own (actions.ts). */
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
  "scim.group_created": {
    what: "The tenant's directory created a group (a group named after a role gives it: docs/scim.md).",
    target: "`scim_group`",
    details: "`name`, `role` (the role it gives, or `none`), `count` (members added)",
    writtenBy: "`createScimGroup`",
  },
  "scim.group_updated": {
    what: "The tenant's directory replaced or patched a group (its name, its members).",
    target: "`scim_group`",
    details: "`name`, `role`, `count` (members added or removed)",
    writtenBy: "`replaceScimGroup`, `patchScimGroup`",
  },
  "scim.group_deleted": {
    what: "The tenant's directory deleted a group.",
    target: "`scim_group`",
    details: "`name`",
    writtenBy: "`deleteScimGroup`",
  },
  "scim.member_role_changed": {
    what: "A member's role changed because its groups did (every process drops its cached sessions of the member).",
    target: "`user`",
    details: "`from`, `to`",
    writtenBy: "`syncRoles` (scim/scim-roles.ts)",
  },
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
} as const satisfies Record<string, ActionRow>;
