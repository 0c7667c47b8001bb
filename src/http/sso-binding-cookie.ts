import type { Context } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import { ATTEMPT_MINUTES } from "../sso/attempts.ts";
import type { BrowserBinding } from "../sso/browser-binding.ts";
import type { SsoConnectionRow } from "../sso/connection-types.ts";
import type { ConsoleEnv } from "./console/session.ts";
import type { AppEnv } from "./request-context.ts";

/**
 * The browser-binding cookie of a sign-in under way (src/sso/browser-binding.ts), one per callback
 * kind. `__Host-`: secure, host-only, path `/` (no subdomain or plain-HTTP page can plant one);
 * HttpOnly; as long-lived as the attempt. OIDC's callback is a top-level GET, which a `SameSite=Lax`
 * cookie reaches; SAML's is the IdP's cross-site form POST, which only a `SameSite=None` cookie
 * reaches (it is no credential: it only has to match the attempt's hash, so a cross-site request
 * carrying it gains nothing).
 */
const COOKIES = {
  oidc: { name: "__Host-plinth_sso_oidc", sameSite: "Lax" },
  saml: { name: "__Host-plinth_sso_saml", sameSite: "None" },
} as const satisfies Record<SsoConnectionRow["type"], { name: string; sameSite: "Lax" | "None" }>;

export function setBindingCookie(
  // the API's routes and the console's pages both start sign-ins
  c: Context<AppEnv> | Context<ConsoleEnv>,
  type: SsoConnectionRow["type"],
  binding: BrowserBinding,
): void {
  const { name, sameSite } = COOKIES[type];
  setCookie(c, name, binding.value, {
    path: "/",
    httpOnly: true,
    secure: true,
    sameSite,
    maxAge: ATTEMPT_MINUTES * 60,
  });
}

export function readBindingCookie(c: Context<AppEnv>, type: SsoConnectionRow["type"]): string | undefined {
  return getCookie(c, COOKIES[type].name);
}
