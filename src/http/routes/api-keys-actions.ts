import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `apiKeysArea` declares (api-keys.ts): docs/audit.md's rows for them. */
export const API_KEYS_ACTIONS = {
  "api_key.created": {
    what: "An API key was created.",
    target: "`api_key`",
    details: "`name`, `scopes`, `prefix` (the public id part), `expiresAt`",
    writtenBy: "`createApiKey`",
  },
  "api_key.rolled": {
    what: "An API key got a new secret part.",
    target: "`api_key`",
    details: "`name`, `prefix`, `graceSeconds`",
    writtenBy: "`rollApiKey`",
  },
  "api_key.revoked": {
    what: "An API key was revoked.",
    target: "`api_key`",
    details: "`name`, `prefix`",
    writtenBy: "`revokeApiKey`",
  },
  "api_key.first_used": {
    what: "An API key was used for the first time.",
    target: "`api_key`",
    details: "—",
    writtenBy: "`markApiKeyUsed` (actor: the key, `apiKey`)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
