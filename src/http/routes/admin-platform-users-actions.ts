import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `platformUsersArea` declares (admin-platform-users.ts): docs/audit.md's rows for them. */
export const PLATFORM_USERS_ACTIONS = {
  "platform_user.created": {
    what: "Platform staff were added.",
    target: "`user`",
    details: "`email`, `role` (`platform_admin` / `platform_viewer`)",
    writtenBy: "`createPlatformUser` (POST /api/admin/platform-users; platform chain)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
