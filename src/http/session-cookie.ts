import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { AppConfig } from "../config/load.ts";
import type { AppEnv } from "./request-context.ts";

/** `__Host-`: secure, host-only and path `/`, so no subdomain or plain-HTTP page can plant it. */
const SESSION_COOKIE = "__Host-plinth_session";

export function readSessionCookie(c: Context<AppEnv>): string | undefined {
  return getCookie(c, SESSION_COOKIE);
}

/** Sets the browser session cookie (HttpOnly: page script never sees it). */
export function setSessionCookie(c: Context<AppEnv>, config: AppConfig, value: string, maxAge: number): void {
  setCookie(c, SESSION_COOKIE, value, {
    path: "/",
    httpOnly: true,
    secure: true,
    sameSite: config.settings.BrowserAuth.SameSite,
    maxAge,
  });
}

export function clearSessionCookie(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { path: "/", secure: true });
}

/** The trusted-device cookie (src/auth/trusted-devices.ts): `__Host-` as the session's, SameSite=Lax. */
const TRUSTED_DEVICE_COOKIE = "__Host-plinth_trusted_device";

export function readTrustedDeviceCookie(c: Context<AppEnv>): string | undefined {
  return getCookie(c, TRUSTED_DEVICE_COOKIE);
}

/** Sets the sealed trusted-device cookie (HttpOnly; Lax: sent on a top-level navigation to sign in). */
export function setTrustedDeviceCookie(c: Context<AppEnv>, value: string, maxAge: number): void {
  setCookie(c, TRUSTED_DEVICE_COOKIE, value, {
    path: "/",
    httpOnly: true,
    secure: true,
    sameSite: "Lax",
    maxAge,
  });
}
