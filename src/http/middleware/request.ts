import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { AppError } from "../../errors.ts";
import type { Logger } from "../../telemetry/logger.ts";
import { forwardedFrom, type TrustedProxies, trustedProxies } from "../client-ip.ts";
import type { AppEnv } from "../context.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The response headers OWASP's REST Security Cheat Sheet asks of every API response: no framing,
 * no MIME sniffing. `Strict-Transport-Security` joins them on responses that travel over HTTPS
 * (`HSTS_HEADER`); RFC 6797 §7.2 forbids it over plain HTTP. `Content-Type` comes from each route,
 * `Cache-Control` from the routes that return something private or live.
 */
export const SECURITY_HEADERS: readonly [string, string][] = [
  ["content-security-policy", "frame-ancestors 'none'"],
  ["x-content-type-options", "nosniff"],
  ["x-frame-options", "DENY"],
];
export const HSTS_HEADER: readonly [string, string] = [
  "strict-transport-security",
  "max-age=31536000; includeSubDomains",
];

/** The request's id: a well-formed incoming `X-Request-Id`, else a new one. */
export function requestIdFor(incoming: string | null): string {
  return incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
}

/**
 * Did the request travel over HTTPS: it came over TLS (`tls`: its URL is `https:`) or, from a
 * trusted proxy, the last `X-Forwarded-Proto` value (the one the proxy wrote) is `https`.
 */
export function overHttps(
  tls: boolean,
  headers: Headers,
  peerAddress: () => string | undefined,
  trusted: TrustedProxies,
): boolean {
  return tls || forwardedFrom(headers, peerAddress, trusted, "x-forwarded-proto")?.toLowerCase() === "https";
}

/**
 * What every request gets, in one middleware (each Hono middleware costs a few µs, and this runs
 * on every request): the request id (a well-formed incoming X-Request-Id, else a new one), then one
 * structured log line (method, path without query, status, duration, request id), the security
 * headers and X-Request-Id on the response. The client IP is worked out only when something asks
 * (`clientIp(c)`): reading the socket peer costs a system call. Under Bun the liveness probe is
 * answered in front of the app with the same id, headers and line (`nativeLiveness`).
 */
export function requestIdLogHeaders(options: {
  logger: Logger;
  trustedProxies: readonly string[];
}): MiddlewareHandler<AppEnv> {
  const trusted = trustedProxies(options.trustedProxies);
  const { logger } = options;
  return async (c, next) => {
    const started = performance.now();
    const id = requestIdFor(c.req.raw.headers.get("x-request-id"));
    c.set("requestId", id);
    c.set("trustedProxies", trusted);
    await next();
    const headers = c.res.headers;
    // a route's own Content-Security-Policy is kept: both policies apply (CSP3 §3.1, a list)
    for (const [name, value] of SECURITY_HEADERS) {
      if (name === "content-security-policy" && headers.has(name)) headers.append(name, value);
      else headers.set(name, value);
    }
    const { raw } = c.req;
    if (overHttps(raw.url.startsWith("https:"), raw.headers, () => c.env?.peerAddress, trusted))
      headers.set(HSTS_HEADER[0], HSTS_HEADER[1]);
    headers.set("x-request-id", id);
    logger.request({
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      durationMs: elapsedMs(started),
      requestId: id,
    });
  };
}

/** Milliseconds since `started` (a `performance.now()` reading), to two decimals. */
export const elapsedMs = (started: number): number => Math.round((performance.now() - started) * 100) / 100;

export function limitBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new AppError("payload_too_large", `The request body exceeds ${maxBytes} bytes.`);
    },
  });
  // GET and HEAD carry no body worth reading; everything else is counted as it streams
  return (c, next) => (c.req.method === "GET" || c.req.method === "HEAD" ? next() : limit(c, next));
}
