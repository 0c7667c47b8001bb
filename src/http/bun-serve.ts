import type { Server } from "bun";
import type { App } from "../app.ts";
import type { Deps } from "../deps.ts";
import { describeError } from "../redact.ts";
import { bunPeer } from "./client-ip.ts";
import { FAST_LANE_ME_PATH } from "./fast-lane.ts";
import { SECURITY_HEADERS } from "./middleware/request.ts";
import { problemTypePath } from "./problem-types.ts";
import { LIVENESS_PATH, nativeLiveness } from "./routes/health.ts";

/**
 * The URL Bun gives a request whose Host is missing or unusable is only its path (`/x`), which
 * Hono would route wrongly; such a request gets a host under `.invalid` (RFC 6761), which the
 * tenancy middleware answers with 400 `host_not_allowed` (http/middleware/tenancy.ts `hostOf`).
 */
const NO_HOST_ORIGIN = "http://no-host.invalid";

/**
 * The largest body Bun itself accepts. Bun answers a body over its `maxRequestBodySize` with a
 * bare 413 of its own (no problem+json, request id or headers) that the app cannot replace, so the
 * app's limit (`Server:MaxBodyBytes`, `limitBody`) is the one that answers: it refuses a
 * Content-Length over the limit before reading and stops reading a chunked body at the limit, and
 * Bun discards the unread rest of a body without buffering it (measured: 300 MB streamed at a
 * refused request, resident memory flat). See docs/decisions.md.
 */
export const BUN_MAX_REQUEST_BODY = Number.MAX_SAFE_INTEGER;

/**
 * How Bun serves the app (server.ts, and bench/http.ts, which measures this): the app behind
 * `fetch`, with the socket peer as its binding, and the liveness probe on Bun's own router in
 * front of it (`nativeLiveness`), except with telemetry on, where the probe takes the app's path
 * so it gets its span and duration metric like every other request. `GET /api/auth/me` is on
 * Bun's router too when the app has a fast lane (`app.fastLane`, src/http/fast-lane.ts): what it
 * declines goes to `fetch` as any other request.
 *
 * `development: false` whatever NODE_ENV says: Bun's development error page shows the working
 * directory, file paths and source lines. Anything that escapes the app reaches `error`, which
 * logs it once and answers a problem+json 500.
 */
export function bunServeOptions(app: App, deps: Deps) {
  const liveness = deps.telemetry.enabled ? undefined : nativeLiveness(deps);
  // the socket peer is the client IP's starting point (http/client-ip.ts)
  const fetch = (req: Request, server: Server<undefined>) => {
    const request = req.url.startsWith("/") ? new Request(`${NO_HOST_ORIGIN}${req.url}`, req) : req;
    return app.fetch(request, bunPeer(server, req));
  };
  const fast = app.fastLane;
  const routes: Record<
    string,
    { GET: (req: Request, server: Server<undefined>) => Response | Promise<Response> }
  > = {};
  if (liveness) routes[LIVENESS_PATH] = { GET: liveness };
  // what the edge cannot finish itself goes to the app untouched (src/http/fast-lane.ts)
  if (fast)
    routes[FAST_LANE_ME_PATH] = {
      GET: (req, server) => {
        const answer = fast(req, server);
        if (answer === undefined) return fetch(req, server);
        if (answer instanceof Response) return answer;
        return answer.then((finished) => finished ?? fetch(req, server));
      },
    };
  return {
    ...(Object.keys(routes).length > 0 ? { routes } : {}),
    development: false,
    // a port another process already serves is a start-up failure, not a silent share
    reusePort: deps.config.settings.Server.ReusePort,
    fetch,
    error: (error: Error) => {
      deps.logger.error("unhandled error", {
        error: describeError(error, deps.redactor.text, { stack: true }),
      });
      return escapedError();
    },
    maxRequestBodySize: BUN_MAX_REQUEST_BODY,
  };
}

/** The 500 for an error that escaped the app: problem+json with the security headers, nothing else. */
export function escapedError(): Response {
  const requestId = crypto.randomUUID();
  const body = {
    type: problemTypePath("internal"),
    title: "Internal error",
    status: 500,
    code: "internal",
    detail: "Internal error",
    requestId,
  };
  return new Response(JSON.stringify(body), {
    status: 500,
    headers: [["content-type", "application/problem+json"], ["x-request-id", requestId], ...SECURITY_HEADERS],
  });
}
