import type { Settings } from "../config/schema.ts";

/** `Server:PublicBaseUrl` without a trailing slash; `http://localhost:<Server:Port>` when unset. */
export function publicBaseUrl(settings: Pick<Settings, "Server">): string {
  return (settings.Server.PublicBaseUrl ?? `http://localhost:${settings.Server.Port}`).replace(/\/+$/, "");
}

/**
 * The paths a message's one-time link opens under the public base URL: pages of the
 * application's front end (or a proxy in front of Plinth), which post the token to the API
 * (docs/email.md, "Links").
 */
export const EMAIL_LINK_PATHS = {
  passwordReset: "/auth/reset-password",
  emailVerification: "/auth/verify-email",
  invitation: "/auth/accept-invitation",
  signUp: "/auth/sign-up/verify",
  signInLink: "/auth/sign-in/link",
  emailChange: "/auth/confirm-email-change",
} as const;

/** `{public base URL}{path}?token=…`: the one link a message may carry. */
export function emailLink(settings: Pick<Settings, "Server">, path: string, token: string): string {
  return `${publicBaseUrl(settings)}${path}?token=${encodeURIComponent(token)}`;
}
