import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `passkeysArea` declares (auth-passkeys.ts): docs/audit.md's rows for them. */
export const PASSKEYS_ACTIONS = {
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
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
