import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { Telemetry } from "../../telemetry/otel.ts";
import type { AppEnv } from "../request-context.ts";

const headerGetter = {
  get: (carrier: Headers, key: string) => carrier.get(key) ?? undefined,
  keys: (carrier: Headers) => [...carrier.keys()],
};

/** The route template of the handler that answered (`/api/admin/tenants/{id}`), not the concrete path. */
export function routeTemplate(c: Parameters<MiddlewareHandler<AppEnv>>[0]): string | undefined {
  const routes = matchedRoutes(c);
  for (let i = routes.length - 1; i >= 0; i--) {
    const route = routes[i];
    // middleware is registered for ALL methods; handlers for one
    if (route && route.method !== "ALL") return route.path;
  }
  return undefined;
}

/**
 * One SERVER span per request, continuing an incoming W3C `traceparent`: route template, method,
 * status and the tenant id (never a user, an e-mail or a query string); plus the request-duration
 * metric. Registered before the request log so that log line carries the trace id.
 */
export function traceRequests(telemetry: Telemetry): MiddlewareHandler<AppEnv> {
  if (!telemetry.enabled) return (_c, next) => next();
  const { tracer, instruments } = telemetry;
  return async (c, next) => {
    const method = c.req.method;
    const parent = telemetry.propagator.extract(ROOT_CONTEXT, c.req.raw.headers, headerGetter);
    const span = tracer.startSpan(
      method,
      { kind: SpanKind.SERVER, attributes: { "http.request.method": method, "url.scheme": "http" } },
      parent,
    );
    const started = performance.now();
    try {
      await context.with(trace.setSpan(parent, span), next);
    } finally {
      const status = c.res.status;
      const route = routeTemplate(c);
      const tenantId = c.get("tenant")?.id ?? c.get("principal")?.tenantId ?? undefined;
      if (route) {
        span.updateName(`${method} ${route}`);
        span.setAttribute("http.route", route);
      }
      span.setAttribute("http.response.status_code", status);
      if (tenantId) span.setAttribute("plinth.tenant.id", tenantId);
      const requestId = c.get("requestId");
      if (requestId) span.setAttribute("plinth.request.id", requestId);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      instruments.httpServerDuration.record((performance.now() - started) / 1000, {
        "http.request.method": method,
        "http.route": route ?? "unmatched",
        "http.response.status_code": status,
      });
    }
  };
}
