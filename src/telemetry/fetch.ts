import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { failSpan, type Telemetry } from "./otel.ts";

export type Fetch = typeof fetch;

const headerSetter = { set: (carrier: Headers, key: string, value: string) => carrier.set(key, value) };

/**
 * `fetch` with a CLIENT span per call (method, host, status; never the path's query or a header)
 * and the W3C `traceparent` header, so the callee continues the trace. With telemetry off it is
 * the given fetch itself. Modules that call out (SMS, DNS, gateway) take a fetch; pass this one.
 */
export function tracedFetch(telemetry: Telemetry, base: Fetch = fetch): Fetch {
  if (!telemetry.enabled) return base;
  const { tracer, instruments } = telemetry;
  const traced = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    // a URL or a Request is accepted at run time; the cast only satisfies one overload
    const request = new Request(input as string, init);
    const url = new URL(request.url);
    const method = request.method;
    const attributes = {
      "http.request.method": method,
      "server.address": url.hostname,
      "server.port": Number(url.port || (url.protocol === "https:" ? 443 : 80)),
      "url.scheme": url.protocol.replace(":", ""),
    };
    const span = tracer.startSpan(`${method}`, { kind: SpanKind.CLIENT, attributes }, context.active());
    const headers = new Headers(request.headers);
    telemetry.propagator.inject(trace.setSpan(context.active(), span), headers, headerSetter);
    const started = performance.now();
    let status = 0;
    try {
      const response = await base(new Request(request, { headers }));
      status = response.status;
      span.setAttribute("http.response.status_code", status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      return response;
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
      instruments.httpClientDuration.record((performance.now() - started) / 1000, {
        "http.request.method": method,
        "server.address": url.hostname,
        "http.response.status_code": status,
      });
    }
  };
  return Object.assign(traced, { preconnect: base.preconnect }) as Fetch;
}
