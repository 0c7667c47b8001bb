import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `tenantUsersArea` declares (users.ts): docs/audit.md's rows for them. */
export const TENANT_USERS_ACTIONS = {
  "user.created": {
    what: "A tenant user was added.",
    target: "`user`",
    details: "`role`",
    writtenBy: "`createTenantUser` (tenant owners/admins, platform admins)",
  },
  "user.disabled": {
    what: "A tenant user was disabled.",
    target: "`user`",
    details: "—",
    writtenBy: "`disableTenantUser`",
  },
  "user.deleted": {
    what: "A tenant user was removed.",
    target: "`user`",
    details: "—",
    writtenBy: "`deleteTenantUser`",
  },
  "user.role_changed": {
    what: "Reserved, not written yet: Plinth has no role change yet.",
    target: "`user`",
    details: "—",
    writtenBy: "—",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
