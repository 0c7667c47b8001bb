import {
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
  SpanStatusCode,
  type TextMapPropagator,
  type Tracer,
  trace,
  type UpDownCounter,
} from "@opentelemetry/api";

/** The instruments Plinth records into; all no-ops while telemetry is off. */
export interface Instruments {
  /** `http.server.request.duration` (s): method, route, status. */
  httpServerDuration: Histogram;
  /** `http.client.request.duration` (s): method, host, status. */
  httpClientDuration: Histogram;
  /** `db.client.operation.duration` (s): operation, outcome. */
  dbDuration: Histogram;
  /** `plinth.db.client.statements.in_flight`: statements sent and not yet answered (pool use). */
  dbInFlight: UpDownCounter;
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
  /** `plinth.webhooks.attempts`: outcome (succeeded, failed), error class. */
  webhookAttempts: Counter;
  /** `plinth.webhooks.attempt.duration` (s): outcome. */
  webhookAttemptDuration: Histogram;
  /** `plinth.loop.tick.duration` (s): loop. */
  loopTickDuration: Histogram;
  /** `plinth.audit.write_failures`: audit rows of refusals and failed sign-ins not written, by action. */
  auditWriteFailures: Counter;
  /**
   * `plinth.audit.rows_suppressed`: audit rows of refusals and failed sign-ins the failure limiter
   * dropped, by action and the limit that was full (`address`, `tenant`).
   */
  auditRowsSuppressed: Counter;
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
  /** W3C `traceparent`/`tracestate` (a no-op while off). */
  readonly propagator: TextMapPropagator;
  /** Runs `fn` in a new active span, ending it (with an error status on a throw) when `fn` settles. */
  inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>, parent?: Context): Promise<T>;
  /** Sends whatever is buffered (tests, shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const noopPropagator: TextMapPropagator = {
  inject: () => {},
  extract: (ctx) => ctx,
  fields: () => [],
};
/** A counter served at 0 from the start, so an alert on its increase has a series to read. */
function zeroed(counter: Counter): Counter {
  counter.add(0);
  return counter;
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
    dbInFlight: meter.createUpDownCounter("plinth.db.client.statements.in_flight", {
      description: "Database statements sent and not yet answered, in this process.",
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
    webhookAttempts: meter.createCounter("plinth.webhooks.attempts", {
      description: "Webhook delivery attempts by outcome and error class.",
    }),
    webhookAttemptDuration: meter.createHistogram("plinth.webhooks.attempt.duration", {
      unit: "s",
      description: "Duration of webhook delivery attempts.",
    }),
    loopTickDuration: meter.createHistogram("plinth.loop.tick.duration", {
      unit: "s",
      description: "Duration of background loop rounds.",
    }),
    auditWriteFailures: zeroed(
      meter.createCounter("plinth.audit.write_failures", {
        description: "Audit rows of refusals and failed sign-ins that could not be written, by action.",
      }),
    ),
    auditRowsSuppressed: zeroed(
      meter.createCounter("plinth.audit.rows_suppressed", {
        description:
          "Audit rows of refusals and failed sign-ins dropped over Audit:FailuresPerMinute, by action and limit.",
      }),
    ),
  };
}

export function makeTelemetry(input: {
  enabled: boolean;
  tracer: Tracer;
  meter: Meter;
  propagator?: TextMapPropagator;
  flush: () => Promise<void>;
  shutdown: () => Promise<void>;
}): Telemetry {
  const { tracer } = input;
  return {
    enabled: input.enabled,
    tracer,
    meter: input.meter,
    instruments: createInstruments(input.meter),
    propagator: input.propagator ?? noopPropagator,
    inSpan: (name, options, fn, parent) => {
      if (!input.enabled) return fn(trace.wrapSpanContext(INVALID_SPAN_CONTEXT));
      return tracer.startActiveSpan(name, options, parent ?? context.active(), async (span) => {
        try {
          return await fn(span);
        } catch (error) {
          span.recordException(scrubbedException(error));
          span.setStatus({ code: SpanStatusCode.ERROR });
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

/** Trace and span id of the active span, for log correlation; undefined without one. */
export function activeTraceFields(): { traceId: string; spanId: string } | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const ctx = span.spanContext();
  if (!trace.isSpanContextValid(ctx)) return undefined;
  return { traceId: ctx.traceId, spanId: ctx.spanId };
}

/** Marks a client span failed by a thrown error: its status and `error.type` (the error's class). */
export function failSpan(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute("error.type", error instanceof Error ? error.name : "unknown");
}
