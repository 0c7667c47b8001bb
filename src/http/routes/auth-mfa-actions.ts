import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `authMfaArea` declares (auth-mfa.ts): docs/audit.md's rows for them. */
export const AUTH_MFA_ACTIONS = {
  "mfa.enrolled": {
    what: "A user enrolled a second factor (a confirmed TOTP authenticator; its backup codes made with it).",
    target: "`user`",
    details: "`method` (`totp`)",
    writtenBy: "`confirmTotp` (auth/totp-factor.ts)",
  },
  "mfa.removed": {
    what: "A user removed a second factor (after a fresh second factor).",
    target: "`user`",
    details: "`method` (`totp`)",
    writtenBy: "`removeTotp`",
  },
  "mfa.backup_code_used": {
    what: "A backup code was spent (sign-in step or step-up); the user is e-mailed a notice.",
    target: "`user`",
    details: "`remaining` (unused codes left)",
    writtenBy: "`useBackupCode` (auth/backup-codes.ts)",
  },
  "mfa.backup_codes_regenerated": {
    what: "A user replaced their backup codes with a new set (the old ones stop working).",
    target: "`user`",
    details: "—",
    writtenBy: "`regenerateBackupCodes`",
  },
  "mfa.device_trusted": {
    what: "A user trusted a browser at a sign-in step (`trustDevice: true`): its later sign-ins in the tenant skip the step while the tenant allows it.",
    target: "`trusted_device`",
    details: "`userId`, `expiresAt`",
    writtenBy: "`trustDevice` (auth/trusted-devices.ts; POST /api/auth/mfa/verify)",
  },
  "mfa.trusted_device_revoked": {
    what: "A trusted browser stopped skipping the step: revoked by its user, a factor reset, a password change, signing out everywhere, the tenant's policy switched off, or its user disabled or removed.",
    target: "`trusted_device`",
    details: "`userId`, `reason`",
    writtenBy: "`revokeTrustedDevices` (auth/trusted-devices.ts)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
