import {
  type Attributes,
  type Context,
  type Counter,
  context,
  createNoopMeter,
  type Histogram,
  INVALID_SPAN_CONTEXT,
  type Meter,
  ProxyTracerProvider,
  type Span,
  type SpanOptions,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
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

/** The instruments Plinth records into; all no-ops while telemetry is off. */
export interface Instruments {
  /** `http.server.request.duration` (s): method, route, status. */
  httpServerDuration: Histogram;
  /** `http.client.request.duration` (s): method, host, status. */
  httpClientDuration: Histogram;
  /** `db.client.operation.duration` (s): operation, outcome. */
  dbDuration: Histogram;
  /** `plinth.db.slow_queries`: queries over `Database:SlowQueryMilliseconds`. */
  dbSlowQueries: Counter;
  /** `plinth.jobs.runs`: kind, outcome (succeeded, failed, dead, lost). */
  jobRuns: Counter;
  /** `plinth.jobs.run.duration` (s): kind, outcome. */
  jobDuration: Histogram;
  /** `plinth.jobs.claimed`: jobs claimed per statement. */
  jobsClaimed: Counter;
  /** `plinth.loop.ticks`: loop, outcome. */
  loopTicks: Counter;
  /** `plinth.loop.tick.duration` (s): loop. */
  loopTickDuration: Histogram;
}

/**
 * Tracing and metrics of one process. Off (no `OpenTelemetry:OtlpEndpoint`), every part is a no-op
 * and the hot paths check `enabled` first, so the cost is a branch.
 */
export interface Telemetry {
  readonly enabled: boolean;
  readonly tracer: Tracer;
  readonly meter: Meter;
  readonly instruments: Instruments;
  readonly propagator: W3CTraceContextPropagator;
  /** Runs `fn` in a new active span, ending it (with an error status on a throw) when `fn` settles. */
  inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>, parent?: Context): Promise<T>;
  /** Sends whatever is buffered (tests, shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

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
  /** Tests and benchmarks: record spans into these processors instead of (or without) an exporter. */
  spanProcessors?: SpanProcessor[];
  metricReaders?: MetricReader[];
}

const propagator = new W3CTraceContextPropagator();
let contextManagerInstalled = false;

/** Bun has no Node auto-instrumentation hooks; an AsyncLocalStorage context manager carries spans across awaits. */
function installContextManager(): void {
  if (contextManagerInstalled) return;
  contextManagerInstalled = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
}

function createInstruments(meter: Meter): Instruments {
  return {
    httpServerDuration: meter.createHistogram("http.server.request.duration", {
      unit: "s",
      description: "Duration of incoming HTTP requests.",
    }),
    httpClientDuration: meter.createHistogram("http.client.request.duration", {
      unit: "s",
      description: "Duration of outgoing HTTP requests.",
    }),
    dbDuration: meter.createHistogram("db.client.operation.duration", {
      unit: "s",
      description: "Duration of database statements.",
    }),
    dbSlowQueries: meter.createCounter("plinth.db.slow_queries", {
      description: "Statements slower than Database:SlowQueryMilliseconds.",
    }),
    jobRuns: meter.createCounter("plinth.jobs.runs", { description: "Finished job runs by outcome." }),
    jobDuration: meter.createHistogram("plinth.jobs.run.duration", {
      unit: "s",
      description: "Duration of job runs.",
    }),
    jobsClaimed: meter.createCounter("plinth.jobs.claimed", { description: "Jobs claimed by the job loop." }),
    loopTicks: meter.createCounter("plinth.loop.ticks", { description: "Background loop rounds." }),
    loopTickDuration: meter.createHistogram("plinth.loop.tick.duration", {
      unit: "s",
      description: "Duration of background loop rounds.",
    }),
  };
}

function makeTelemetry(input: {
  enabled: boolean;
  tracer: Tracer;
  meter: Meter;
  flush: () => Promise<void>;
  shutdown: () => Promise<void>;
}): Telemetry {
  const { tracer } = input;
  return {
    enabled: input.enabled,
    tracer,
    meter: input.meter,
    instruments: createInstruments(input.meter),
    propagator,
    inSpan: (name, options, fn, parent) => {
      if (!input.enabled) return fn(trace.wrapSpanContext(INVALID_SPAN_CONTEXT));
      return tracer.startActiveSpan(name, options, parent ?? context.active(), async (span) => {
        try {
          return await fn(span);
        } catch (error) {
          span.recordException(scrubbedException(error));
          span.setStatus({ code: 2 /* ERROR */ });
          throw error;
        } finally {
          span.end();
        }
      });
    },
    flush: input.flush,
    shutdown: input.shutdown,
  };
}

/** Exceptions on spans carry the error's name only: messages may hold values (see redact.ts). */
function scrubbedException(error: unknown): { name: string; message: string } {
  const name = error instanceof Error ? error.name : typeof error;
  return { name, message: name };
}

/** Telemetry that records nothing. */
export function disabledTelemetry(): Telemetry {
  return makeTelemetry({
    enabled: false,
    tracer: new ProxyTracerProvider().getTracer("plinth"),
    meter: createNoopMeter(),
    flush: async () => {},
    shutdown: async () => {},
  });
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
    flush: async () => {
      await Promise.allSettled([tracerProvider.forceFlush(), meterProvider.forceFlush()]);
    },
    shutdown: async () => {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  });
}

/** Trace and span id of the active span, for log correlation; undefined without one. */
export function activeTraceFields(): { traceId: string; spanId: string } | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const ctx = span.spanContext();
  if (!trace.isSpanContextValid(ctx)) return undefined;
  return { traceId: ctx.traceId, spanId: ctx.spanId };
}
