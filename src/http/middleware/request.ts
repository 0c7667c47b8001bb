import type { Context, ErrorHandler, MiddlewareHandler, Next } from "hono";
import { bodyLimit } from "hono/body-limit";
import { AppError } from "../../errors.ts";
import type { Logger } from "../../telemetry/logger.ts";
import { forwardedFrom, normaliseIp, type TrustedProxies, trustedProxies } from "../client-ip.ts";
import type { AppEnv } from "../request-context.ts";
import { readSessionCookie } from "../session-cookie.ts";
import { refuseUnstorableInput } from "./storable-input.ts";

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

/**
 * The request's id, and what the client said it was: a well-formed `X-Request-Id` is the id only
 * when a trusted proxy (`Tenancy:Resolution:TrustedProxies`) sent it; anyone else's is kept apart as
 * `clientRequestId` (logged, and in an audit row's details) and the id is a new one, so no client
 * chooses the id an audit row or a log line is found by (issue #29, docs/audit.md).
 */
export function requestIdOf(
  incoming: string | null,
  peerAddress: () => string | undefined,
  trusted: TrustedProxies,
): { requestId: string; clientRequestId?: string } {
  if (!incoming || !REQUEST_ID.test(incoming)) return { requestId: crypto.randomUUID() };
  const peer = trusted.empty ? null : normaliseIp(peerAddress());
  if (peer !== null && trusted.has(peer)) return { requestId: incoming };
  return { requestId: crypto.randomUUID(), clientRequestId: incoming };
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
 * Checks that run inside the request line's step (`requestIdLogHeaders`' `checks`): every request
 * but a probe's passes them, so they share its step of Hono's compose instead of taking one each.
 */
export interface EdgeChecks {
  /** The checks, as one middleware (`chainMiddleware`). */
  run: MiddlewareHandler<AppEnv>;
  /** Paths whose GET and HEAD skip the checks: the probes, mounted right after this step. */
  exempt: ReadonlySet<string>;
  /** The app's error handler (the one `app.onError` is given). */
  onError: ErrorHandler<AppEnv>;
}

/**
 * What every request gets, in one middleware (each Hono middleware is a step of its compose, an
 * async call and two promises, and this runs on every request): the request id (`requestIdOf`: a
 * trusted proxy's X-Request-Id, else a new one), then `checks` (app.ts: CORS, the global rate
 * limit, the host check and tenant resolution), then one structured log line (method, path without
 * query, status, duration, request id), the security headers and X-Request-Id on the response. The
 * client IP is worked out only when something asks (`clientIp(c)`): reading the socket peer costs a
 * system call. Under Bun the liveness probe is answered in front of the app with the same id,
 * headers and line (`nativeLiveness`).
 *
 * A check's error is answered as Hono answers a middleware's (`onError`, in the check's place), so
 * the response still gets its headers and line; a Response a check returns (a CORS preflight) is
 * the answer, as it is from a middleware of its own.
 */
export function requestIdLogHeaders(options: {
  logger: Logger;
  trustedProxies: readonly string[];
  checks?: EdgeChecks;
}): MiddlewareHandler<AppEnv> {
  const trusted = trustedProxies(options.trustedProxies);
  const { logger, checks } = options;
  return async (c, next) => {
    const started = performance.now();
    const id = requestIdOf(c.req.raw.headers.get("x-request-id"), () => c.env?.peerAddress, trusted);
    c.set("requestId", id.requestId);
    if (id.clientRequestId) c.set("clientRequestId", id.clientRequestId);
    c.set("trustedProxies", trusted);
    const { method } = c.req;
    // a probe skips the checks, and its passing line is written at debug (`RequestLine.probe`)
    const probe =
      checks !== undefined && (method === "GET" || method === "HEAD") && checks.exempt.has(c.req.path);
    if (checks && !probe) {
      try {
        const answer = await checks.run(c, next);
        if (answer instanceof Response && !c.finalized) c.res = answer;
      } catch (error) {
        // what Hono's compose does with a middleware's error (a non-Error goes up as it does there)
        if (!(error instanceof Error)) throw error;
        c.error = error;
        c.res = await checks.onError(error, c);
      }
    } else await next();
    const headers = c.res.headers;
    // a route's own Content-Security-Policy is kept: both policies apply (CSP3 §3.1, a list)
    for (const [name, value] of SECURITY_HEADERS) {
      if (name === "content-security-policy" && headers.has(name)) headers.append(name, value);
      else headers.set(name, value);
    }
    const { raw } = c.req;
    if (overHttps(raw.url.startsWith("https:"), raw.headers, () => c.env?.peerAddress, trusted))
      headers.set(HSTS_HEADER[0], HSTS_HEADER[1]);
    headers.set("x-request-id", id.requestId);
    logger.request({
      method,
      path: c.req.path,
      status: c.res.status,
      durationMs: elapsedMs(started),
      requestId: id.requestId,
      clientRequestId: id.clientRequestId,
      probe,
    });
  };
}

/**
 * Middleware run one inside the other as one (`a(c, () => b(c, next))`), without a compose step
 * each: for `EdgeChecks.run`, whose errors and answers `requestIdLogHeaders` handles.
 */
export function chainMiddleware(...steps: MiddlewareHandler<AppEnv>[]): MiddlewareHandler<AppEnv> {
  return steps.reduceRight<MiddlewareHandler<AppEnv>>(
    // every step returns its `next()`'s promise or throws (a Response only when it answers itself,
    // and then it calls no `next`), so an inner step's result is what `next` returns
    (inner, step) => (c, next) => step(c, () => inner(c, next) as Promise<void>),
    (_c, next) => next(),
  );
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

/** How deeply a JSON request body may nest (objects and arrays); deeper bodies get 400 before any handler. */
export const MAX_JSON_DEPTH = 64;

/**
 * The nesting depth of a JSON text, counted over `{` and `[` outside strings, stopping as soon as
 * it passes `max` (a linear scan; the body is already bounded by `limitBody`).
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92)
        i++; // backslash: skip the escaped character
      else if (ch === 34) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 123 || ch === 91) {
      if (++depth > max) return true;
    } else if (ch === 125 || ch === 93) depth--;
  }
  return false;
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\b/i;

/**
 * Refuses a JSON body nested deeper than `maxDepth` with 400 before any handler parses it (a
 * deeply nested value overflows the stack when serialised again, e.g. into a database column).
 * The text read here is what the handler then reads (Hono caches the body).
 */
export function limitJsonDepth(maxDepth: number): MiddlewareHandler<AppEnv> {
  const check = async (c: Context<AppEnv>, next: Next) => {
    if (jsonDepthExceeds(await c.req.text(), maxDepth)) {
      throw new AppError("bad_request", `The JSON body is nested deeper than ${maxDepth} levels.`);
    }
    return next();
  };
  return (c, next) => {
    const type = c.req.header("content-type");
    if (c.req.method === "GET" || c.req.method === "HEAD" || !type || !JSON_TYPE.test(type)) return next();
    return check(c, next);
  };
}

/**
 * The body limit, the JSON depth limit, the input guard (`refuseUnstorableInput`) and no-store, in
 * this order, as one middleware: every request passes them, and each middleware of its own is a
 * step of Hono's compose (an async call and two promises). A GET or HEAD skips the two body limits.
 */
export function guardRequest(maxBodyBytes: number): MiddlewareHandler<AppEnv> {
  const limit = limitBody(maxBodyBytes);
  const depth = limitJsonDepth(MAX_JSON_DEPTH);
  const input = refuseUnstorableInput();
  const noStore = noStoreWhenAuthenticated();
  return (c, next) => {
    const afterInput = async () => {
      await noStore(c, next);
    };
    if (c.req.method === "GET" || c.req.method === "HEAD") {
      // a GET's only input is its URL, serialised and percent-encoded: without a `%` it holds no
      // unstorable text (refuseUnstorableInput), so it goes straight on
      if (!c.req.url.includes("%")) return noStore(c, next);
      return input(c, afterInput);
    }
    return limit(c, async () => {
      await depth(c, async () => {
        await input(c, afterInput);
      });
    });
  };
}

/**
 * `Cache-Control: no-store` on every answer to a request that carried credentials (a bearer token
 * or the session cookie), unless the route set its own: an authenticated answer is for its caller
 * only, and no shared or browser cache may keep it.
 */
export function noStoreWhenAuthenticated(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (c.res.headers.has("cache-control")) return;
    const authorization = c.req.header("authorization");
    if ((authorization && /^bearer\s/i.test(authorization)) || readSessionCookie(c) !== undefined)
      c.res.headers.set("cache-control", "no-store");
  };
}
