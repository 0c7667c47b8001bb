import type { Attributes } from "@opentelemetry/api";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  MeterProvider,
  type MetricReader,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from "@opentelemetry/sdk-metrics";
import {
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";
import { disabledTelemetry, makeTelemetry, type Telemetry } from "./otel.ts";

// The OpenTelemetry SDK and exporters (~45 ms to import): loaded only when telemetry is on
// (src/deps.ts imports this module dynamically), so the migrator and an unexported API skip it.

export interface TelemetryOptions {
  /** `OpenTelemetry:OtlpEndpoint`: the collector's base URL (`/v1/traces`, `/v1/metrics` are appended). */
  endpoint?: string;
  serviceName: string;
  serviceVersion?: string;
  environment?: string;
  /** Metric export interval (default 15 s). */
  metricIntervalMs?: number;
  /** `OpenTelemetry:SampleRatio`: share of new traces recorded (default 1). */
  sampleRatio?: number;
  /** `OpenTelemetry:Prometheus`: a separate listener serving `GET /metrics` (none when absent). */
  prometheus?: { host: string; port: number; onError?: (error: Error) => void };
  /** Tests and benchmarks: record spans into these processors instead of (or without) an exporter. */
  spanProcessors?: SpanProcessor[];
  metricReaders?: MetricReader[];
}

let contextManagerInstalled = false;

/** Bun has no Node auto-instrumentation hooks; an AsyncLocalStorage context manager carries spans across awaits. */
function installContextManager(): void {
  if (contextManagerInstalled) return;
  contextManagerInstalled = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
}

/**
 * Exports traces and metrics over OTLP/HTTP (JSON) when an endpoint is set (or processors are
 * given); otherwise returns `disabledTelemetry()`. Providers are this object's own, not global,
 * so tests can build several; only the context manager is process-wide.
 */
export function createTelemetry(options: TelemetryOptions): Telemetry {
  const processors = [...(options.spanProcessors ?? [])];
  const readers = [...(options.metricReaders ?? [])];
  const base = options.endpoint?.replace(/\/+$/, "");
  if (base) {
    processors.push(
      new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${base}/v1/traces` }) }),
    );
    const exporter: PushMetricExporter = new OTLPMetricExporter({ url: `${base}/v1/metrics` });
    readers.push(
      new PeriodicExportingMetricReader({
        exporter,
        exportIntervalMillis: options.metricIntervalMs ?? 15_000,
      }),
    );
  }
  if (options.prometheus)
    readers.push(
      new PrometheusExporter(
        { host: options.prometheus.host, port: options.prometheus.port, endpoint: "/metrics" },
        (error) => {
          if (error) options.prometheus?.onError?.(error);
        },
      ),
    );
  if (processors.length === 0 && readers.length === 0) return disabledTelemetry();
  installContextManager();
  const attributes: Attributes = { [ATTR_SERVICE_NAME]: options.serviceName };
  if (options.serviceVersion) attributes[ATTR_SERVICE_VERSION] = options.serviceVersion;
  if (options.environment) attributes["deployment.environment.name"] = options.environment;
  const resource = resourceFromAttributes(attributes);
  const ratio = options.sampleRatio ?? 1;
  const sampler = new ParentBasedSampler({
    root: ratio >= 1 ? new AlwaysOnSampler() : new TraceIdRatioBasedSampler(ratio),
  });
  const tracerProvider = new TracerProvider({ resource, spanProcessors: processors, sampler });
  const meterProvider = new MeterProvider({ resource, readers });
  return makeTelemetry({
    enabled: true,
    tracer: tracerProvider.getTracer("plinth"),
    meter: meterProvider.getMeter("plinth"),
    propagator: new W3CTraceContextPropagator(),
    flush: async () => {
      await Promise.allSettled([tracerProvider.forceFlush(), meterProvider.forceFlush()]);
    },
    shutdown: async () => {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  });
}
