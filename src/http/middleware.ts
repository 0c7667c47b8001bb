import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Logger } from "../telemetry/logger.ts";
import { resolveClientIp, trustedProxies } from "./client-ip.ts";
import type { AppEnv } from "./context.ts";
import { ProblemError } from "./errors.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The response headers OWASP's REST Security Cheat Sheet asks of a JSON API (set on every response,
 * in one pass): no framing, no MIME sniffing, HTTPS only, no referrer. Browser-page headers
 * (COOP, CORP, …) are left to the pages that need them.
 */
export const SECURITY_HEADERS: readonly [string, string][] = [
  ["content-security-policy", "frame-ancestors 'none'"],
  ["strict-transport-security", "max-age=31536000; includeSubDomains"],
  ["x-content-type-options", "nosniff"],
  ["x-frame-options", "DENY"],
  ["referrer-policy", "no-referrer"],
];

/**
 * What every request gets, in one middleware (each Hono middleware costs a few µs, and this runs
 * on every request): the request id (a well-formed incoming X-Request-Id, else a new one), the
 * real client IP, then one structured log line (method, path without query, status, duration,
 * request id), the security headers and X-Request-Id on the response.
 */
export function edge(options: {
  logger: Logger;
  trustedProxies: readonly string[];
}): MiddlewareHandler<AppEnv> {
  const trusted = trustedProxies(options.trustedProxies);
  const { logger } = options;
  return async (c, next) => {
    const started = performance.now();
    const incoming = c.req.header("x-request-id");
    const id = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set("requestId", id);
    c.set("clientIp", resolveClientIp(c.env?.peerAddress, c.req.header("x-forwarded-for"), trusted));
    await next();
    const headers = c.res.headers;
    for (const [name, value] of SECURITY_HEADERS) headers.set(name, value);
    headers.set("x-request-id", id);
    const status = c.res.status;
    const fields = {
      method: c.req.method,
      path: c.req.path,
      status,
      durationMs: Math.round((performance.now() - started) * 100) / 100,
      requestId: id,
    };
    if (status >= 500) logger.error("request", fields);
    else logger.info("request", fields);
  };
}

export function limitBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ProblemError("payload_too_large", `The request body exceeds ${maxBytes} bytes.`);
    },
  });
  // GET and HEAD carry no body worth reading; everything else is counted as it streams
  return (c, next) => (c.req.method === "GET" || c.req.method === "HEAD" ? next() : limit(c, next));
}
