import { normaliseOrigin } from "../auth/origins.ts";
import type { AppConfig } from "../config/load.ts";
import { publicBaseUrl } from "../email/links.ts";
import { AppError } from "../errors.ts";

/** Where a finished sign-in goes when the caller names no `returnTo`: a page of the application's front end. */
export const DEFAULT_RETURN_PATH = "/auth/sso/complete";

/**
 * The `returnTo` of a sign-in, checked: an absolute http(s) URL under an origin of
 * `BrowserAuth:AllowedOrigins` or under `Server:PublicBaseUrl` (the application's front end, the
 * console); none: `<PublicBaseUrl>/auth/sso/complete`. A value that is no such URL is a 400 naming
 * `returnTo`; a well-formed URL under another origin is a 403 (as the console answers an origin it does
 * not serve), so a sign-in code is never sent to a site the operator did not list.
 */
export function checkReturnTo(config: AppConfig, returnTo: string | undefined): string {
  const base = publicBaseUrl(config.settings);
  if (returnTo === undefined) return `${base}${DEFAULT_RETURN_PATH}`;
  const refuse = (message: string) =>
    new AppError("validation_failed", "The return address is not allowed.", {
      fields: [{ path: "returnTo", message }],
    });
  let url: URL;
  try {
    url = new URL(returnTo);
  } catch {
    throw refuse("must be an absolute URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw refuse("must be an http(s) URL");
  if (url.username || url.password) throw refuse("must not carry credentials");
  const allowed = new Set([
    ...config.settings.BrowserAuth.AllowedOrigins.map(normaliseOrigin),
    normaliseOrigin(base),
  ]);
  if (!allowed.has(url.origin))
    throw new AppError(
      "forbidden",
      `returnTo's origin ${url.origin} is not in BrowserAuth:AllowedOrigins (nor Server:PublicBaseUrl).`,
    );
  url.hash = "";
  return url.toString();
}

/** `returnTo` with the one query parameter a finished sign-in adds (`code`, or `error`). */
export function withParam(returnTo: string, name: "code" | "error", value: string): string {
  const url = new URL(returnTo);
  url.searchParams.set(name, value);
  return url.toString();
}
