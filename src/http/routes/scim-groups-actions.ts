import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `scimGroupsArea` declares (scim-groups.ts): docs/audit.md's rows for them. */
export const SCIM_GROUPS_ACTIONS = {
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
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
