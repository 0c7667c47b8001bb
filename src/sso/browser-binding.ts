import { timingSafeEqual } from "node:crypto";
import { opaqueToken, tokenHash } from "../auth/opaque-tokens.ts";
import type { SsoAttempt } from "./attempts.ts";
import type { SsoCheck } from "./connection-types.ts";

/**
 * Login-CSRF protection (docs/sso.md, "The browser that started it"): the request that starts a
 * sign-in (discover, a test sign-in) sets a short-lived cookie holding a fresh random value; the
 * attempt keeps only its SHA-256. A callback is accepted only from a browser that sends the value
 * back, so a victim cannot be signed in to an attacker's account with a callback URL (OIDC `code` and
 * `state`, or a SAML response and its `RelayState`) that the attacker's own sign-in produced.
 */
export interface BrowserBinding {
  /** The cookie's value (sent to the browser only). */
  value: string;
  /** What the attempt keeps. */
  hash: string;
}

export function newBrowserBinding(): BrowserBinding {
  const value = opaqueToken(32);
  return { value, hash: tokenHash(value) };
}

/** Whether `cookie` is the value the attempt was started with (compared as hashes, in constant time). */
function bindingHolds(attempt: SsoAttempt, cookie: string | undefined): boolean {
  const expected = attempt.data.browser;
  if (!expected || !cookie) return false;
  const a = Buffer.from(tokenHash(cookie));
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The `browser` check of a callback, in words. */
export function browserCheck(attempt: SsoAttempt, cookie: string | undefined): SsoCheck {
  return bindingHolds(attempt, cookie)
    ? { check: "browser", ok: true, detail: "The callback came to the browser that started this sign-in." }
    : {
        check: "browser",
        ok: false,
        detail: cookie
          ? "This callback belongs to a sign-in another browser started (login CSRF protection): start the sign-in in this browser."
          : "The browser sent no sign-in cookie: the sign-in was started elsewhere, or the cookie was blocked or expired. Start it again in this browser.",
      };
}
