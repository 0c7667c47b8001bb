/** How a session's user authenticated (RFC 8176 `amr`, `auth_time`): what a sign-in opens its session with, and what a session row states. */
import type { SignIn } from "./sessions.ts";

/** How and when a session's user authenticated: the `amr` and `auth_time` of its access tokens. */
export interface SessionAuth {
  amr: string[];
  authTime: Date;
}

/** RFC 8176 values of a sign-in by `method` alone (an e-mailed link has none in the registry). */
const METHOD_AMR: Record<SignIn["method"], string[]> = {
  password: ["pwd"],
  sms: ["sms"],
  passkey: ["hwk"],
  email_code: ["otp"],
  email_link: [],
  switch: [],
  invitation: [],
  signup: [],
  // not an RFC 8176 value: the tenant's identity provider authenticated the user (docs/sso.md)
  sso: ["sso"],
};

/** The `amr` and `auth_time` a sign-in opens its session with. */
export const authOf = (signIn: SignIn, now: Date): SessionAuth =>
  signIn.auth ?? { amr: METHOD_AMR[signIn.method], authTime: now };

/** A session row's authentication as its tokens state it (`authTime` null: a session from before). */
export const sessionAuthOf = (row: {
  amr: string[];
  authTime: Date | null;
  createdAt: Date;
}): SessionAuth => ({
  amr: row.amr,
  authTime: row.authTime ?? row.createdAt,
});
