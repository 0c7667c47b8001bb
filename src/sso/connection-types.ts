import type { TenantCtx } from "../context.ts";
import type { SsoConnectionType as ConnectionTypeName, ssoConnections } from "../db/schema/sso.ts";
import type { SsoDeps } from "./sso-deps.ts";

/** A connection row as the connection types read it (the client secret stays in tenant secrets). */
export type SsoConnectionRow = typeof ssoConnections.$inferSelect;

/**
 * Who the provider says signed in, in Plinth's terms: what a connection type's callback hands to
 * `finishSsoSignIn` once every check of its protocol has passed.
 */
export interface SsoProfile {
  /** The provider's stable id of the user (OIDC `sub`, SAML `NameID`): audit only. */
  subject: string;
  email: string;
  name: string;
  groups: string[];
  /** RFC 8176 values the provider reported (`pwd`, `mfa`, `otp`...), if any. */
  amr: string[];
}

/** One check of a sign-in, in words (the test sign-in lists them all; a failed one names what is wrong). */
export interface SsoCheck {
  check: string;
  ok: boolean;
  detail: string;
}

/**
 * A kind of connection (docs/sso.md, "Connection types"). `start` answers the provider's URL to send
 * the browser to and what its callback will need (`data`, stored with the sign-in attempt: seal
 * secret values with data protection). The type's own callback route takes the attempt back
 * (`takeSsoAttempt`), runs its protocol's checks and ends in `finishSsoSignIn` (or `failSsoSignIn`).
 */
export interface SsoConnectionType {
  start(
    deps: SsoDeps,
    ctx: TenantCtx,
    input: { connection: SsoConnectionRow; state: string; loginHint?: string },
  ): Promise<{ redirectUrl: string; data: Record<string, string> }>;
}

export type { ConnectionTypeName };
