import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { readinessProbes } from "../../health/probes.ts";
import { createReadinessCheck } from "../../health/readiness.ts";
import { requestLevel } from "../../telemetry/logger.ts";
import { trustedProxies } from "../client-ip.ts";
import { elapsedMs, HSTS_HEADER, overHttps, requestIdOf, SECURITY_HEADERS } from "../middleware/request.ts";
import { apiRoute } from "../openapi.ts";
import { createRouter } from "../request-context.ts";

const HEALTH_JSON = "application/health+json";
/** A probe's answer is live: never stored by any cache. */
const PROBE_HEADERS = { "content-type": HEALTH_JSON, "cache-control": "no-store" };
/** Each dependency gets this long; readiness answers within it even when a dependency hangs. */
export const PROBE_TIMEOUT_MS = 1_000;

const checkResult = z.object({
  componentType: z.string(),
  status: z.enum(["pass", "fail"]),
  observedValue: z.number(),
  observedUnit: z.literal("ms"),
  time: z.string(),
  output: z.string().optional(),
});
const readinessBody = z
  .object({ status: z.enum(["pass", "fail"]), checks: z.record(z.string(), z.array(checkResult)) })
  .openapi("Readiness");

export const LIVENESS_PATH = "/api/health";
const LIVENESS_BODY = { status: "pass" as const };

const liveness = apiRoute("probe", {
  method: "get",
  path: LIVENESS_PATH,
  operationId: "getLiveness",
  tags: ["health"],
  summary: "Liveness: the process answers. Touches no dependency.",
  responses: {
    200: {
      description: "The process is alive.",
      content: { [HEALTH_JSON]: { schema: z.object({ status: z.literal("pass") }).openapi("Liveness") } },
    },
  },
});

const readiness = apiRoute("probe", {
  method: "get",
  path: "/api/health/ready",
  operationId: "getReadiness",
  tags: ["health"],
  summary:
    "Readiness: the database answers and has every migration this code ships, and the configured cache answers.",
  responses: {
    200: { description: "Every dependency passed.", content: { [HEALTH_JSON]: { schema: readinessBody } } },
    503: {
      description: "A dependency failed or timed out.",
      content: { [HEALTH_JSON]: { schema: readinessBody } },
    },
  },
});

export function healthRoutes(deps: Deps) {
  const check = createReadinessCheck(readinessProbes(deps), {
    timeoutMs: PROBE_TIMEOUT_MS,
    clock: deps.clock,
  });

  return createRouter()
    .openapi(liveness, (c) => c.json(LIVENESS_BODY, 200, PROBE_HEADERS))
    .openapi(readiness, async (c) => {
      const result = await check();
      return result.status === "pass"
        ? c.json(result, 200, PROBE_HEADERS)
        : c.json(result, 503, PROBE_HEADERS);
    });
}

/**
 * The liveness probe answered in front of the app by Bun's own router (`Bun.serve` `routes`, see
 * http/bun-serve.ts): the response and request line the route above gets through the `edge`
 * middleware (request id, probe and security headers, HSTS over HTTPS, the log line), without the
 * framework's dispatch, which costs as much again as all of that. Orchestrators and load balancers
 * call it every few seconds per instance. A test holds the two answers equal.
 *
 * Its passing line is written at `debug` (`RequestLine.probe`): below that level, and with no
 * trusted proxy (whose X-Request-Id or X-Forwarded-Proto would count), nothing of the request is
 * read at all: Bun builds a request's whole `Headers` on first use, the dearest part of the answer.
 */
export function nativeLiveness(deps: Deps) {
  const trusted = trustedProxies(deps.config.settings.Tenancy.Resolution.TrustedProxies);
  const { logger } = deps;
  // One header set per scheme, its X-Request-Id set per response: the Response copies the headers
  // when it is made, and this is cheaper in Bun than building them from an object each time.
  const plain = new Headers([...Object.entries(PROBE_HEADERS), ...SECURITY_HEADERS]);
  const secure = new Headers([...plain, [...HSTS_HEADER]]);
  const body = JSON.stringify(LIVENESS_BODY);
  // the level is fixed for the process (`Logging:Level` is read at start)
  const unread = trusted.empty && !logger.enabled(requestLevel({ status: 200, probe: true }));
  return (
    req: Request,
    server: { readonly protocol: string | null; requestIP(req: Request): { address: string } | null },
  ): Response => {
    // the server's protocol, not req.url: Bun builds that string on first use
    const tls = server.protocol === "https";
    if (unread) {
      // what the branch below would answer: a new id (no proxy's to take), HSTS only over TLS
      const headers = tls ? secure : plain;
      headers.set("x-request-id", crypto.randomUUID());
      return new Response(body, { status: 200, headers });
    }
    const started = performance.now();
    const peer = () => server.requestIP(req)?.address;
    // the same rule as every route: a client's own id is logged apart, only a trusted proxy's is used
    const id = requestIdOf(req.headers.get("x-request-id"), peer, trusted);
    const headers = overHttps(tls, req.headers, peer, trusted) ? secure : plain;
    headers.set("x-request-id", id.requestId);
    const response = new Response(body, { status: 200, headers });
    logger.request({
      method: req.method,
      path: LIVENESS_PATH,
      status: 200,
      durationMs: elapsedMs(started),
      requestId: id.requestId,
      clientRequestId: id.clientRequestId,
      probe: true,
    });
    return response;
  };
}
