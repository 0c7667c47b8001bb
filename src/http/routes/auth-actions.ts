import type { ActionRow } from "../../audit/action-row.ts";

/** The audit actions of the area `authArea` declares (auth.ts): docs/audit.md's rows for them. */
export const AUTH_ACTIONS = {
  "auth.sign_in": [
    {
      what: "A user signed in.",
      outcome: "success",
      target: "`session`",
      details:
        "`method` (`password`, `sms`, `passkey`, `email_code`, `email_link`: a mailed code or link, `switch`: from another tenant's session, `invitation`: an accepted invitation, `signup`, `sso`: a finished single sign-on), `kind` (`token`, `browser`)",
      writtenBy:
        "`insertSessionIfUnchanged` (auth/sessions.ts): token and browser sessions, in the chain of the session's tenant",
    },
    {
      what: "A sign-in was refused (wrong password or code, unknown account).",
      outcome: "failure",
      target: "`user` (id or null)",
      details:
        "`method`, `email` (password, e-mail code) or `phone` (masked, SMS), `reason` (passkey: why it was refused; sso: the failed `check` in words, target `sso_connection`)",
      writtenBy:
        "`verifyCredentials`, `verifySmsCode`, `finishPasskeySignIn`, `verifyEmailCode`, `failSsoSignIn` (rate limited)",
    },
  ],
  "auth.sign_out": {
    what: "A user signed out.",
    target: "`session`",
    details: "`reason: logout`",
    writtenBy: "`logout`, `revokeCallerSession`",
  },
  "auth.password_changed": {
    what: "A user changed their password (every session of theirs ends).",
    target: "`user`",
    details: "—",
    writtenBy: "`changePassword`",
  },
  "auth.session_revoked": {
    what: "A session was ended by the system.",
    target: "`session`",
    details: "`reason` (`refresh token reuse`, `user not active`)",
    writtenBy: "`refreshSession` (actor: system `auth`)",
  },
} as const satisfies Record<string, ActionRow | readonly ActionRow[]>;
