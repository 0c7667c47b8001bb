import type { ActionRow } from "./action-row.ts";

/** The actions of passkeys and second factors (docs/auth.md), part of ACTIONS. */
export const MFA_ACTIONS = {
  "passkey.registered": {
    what: "A user registered a passkey (WebAuthn credential) for themself.",
    target: "`passkey`",
    details: "`name`, `hostname` (the relying-party id), `userId`",
    writtenBy: "`finishPasskeyRegistration` (POST /api/auth/passkeys/register/verify, the console)",
  },
  "passkey.renamed": {
    what: "A user renamed one of their passkeys.",
    target: "`passkey`",
    details: "`name` (the new one)",
    writtenBy: "`renamePasskey`",
  },
  "passkey.removed": {
    what: "A user removed one of their passkeys.",
    target: "`passkey`",
    details: "`name`, `hostname`, `userId`",
    writtenBy: "`removePasskey`",
  },
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
  "tenant.security_policy_changed": {
    what: "A tenant's second-factor policy changed (`requireMfa`, `enrolmentGraceDays`).",
    target: "`tenant`",
    details: "`before`, `after`",
    writtenBy: "`updateSecurityPolicy` (auth/security-policy.ts; after a fresh second factor)",
  },
  "mfa.reset": {
    what: "An owner, admin or platform admin removed every second factor of a member (recovery); the member is e-mailed.",
    target: "`user`",
    details: "`removed` (the kinds removed)",
    writtenBy: "`resetMemberFactors` (auth/mfa-reset.ts)",
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
} as const satisfies Record<string, ActionRow>;
