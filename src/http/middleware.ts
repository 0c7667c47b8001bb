import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Logger } from "../telemetry/logger.ts";
import type { AppEnv } from "./context.ts";
import { ProblemError } from "./errors.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Takes a well-formed incoming X-Request-Id or makes one; echoes it on the response. */
export function requestId(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const incoming = c.req.header("x-request-id");
    const id = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set("requestId", id);
    await next();
    c.header("x-request-id", id);
  };
}

/** One structured line per request: method, path (no query), status, duration, request id. */
export function requestLog(logger: Logger): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const status = c.res.status;
    const fields = {
      method: c.req.method,
      path: c.req.path,
      status,
      durationMs: Math.round((performance.now() - started) * 100) / 100,
      requestId: c.get("requestId") as string | undefined,
    };
    if (status >= 500) logger.error("request", fields);
    else logger.info("request", fields);
  };
}

export function limitBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ProblemError("payload_too_large", `The request body exceeds ${maxBytes} bytes.`);
    },
  });
}
