import { SpanKind } from "@opentelemetry/api";
import type { Logger } from "../telemetry/logger.ts";
import type { Telemetry } from "../telemetry/otel.ts";
import type { JobEvent } from "./job-loop.ts";
import { type JobDefinition, JobRegistry } from "./registry.ts";

/**
 * The registry with every handler run inside a `job <kind>` span (a new trace root) and followed by
 * one `job run` log line (id, kind, attempt, duration, outcome; the trace id while the span is
 * active). The handlers themselves are unchanged.
 */
export function observeJobs(
  registry: JobRegistry,
  deps: { telemetry: Telemetry; logger: Logger },
): JobRegistry {
  const { telemetry, logger } = deps;
  const log = logger.child({ loop: "jobs" });
  const wrap = (definition: JobDefinition): JobDefinition => ({
    ...definition,
    handler: (payload, job) =>
      telemetry.inSpan(
        `job ${job.kind}`,
        {
          kind: SpanKind.CONSUMER,
          root: true,
          attributes: {
            "plinth.job.id": job.id,
            "plinth.job.kind": job.kind,
            "plinth.job.attempt": job.attempt,
          },
        },
        async () => {
          const started = performance.now();
          const fields = { jobId: job.id, kind: job.kind, attempt: job.attempt };
          try {
            // the handler's return value is the job's result: handed on, not dropped
            const result = await definition.handler(payload, job);
            log.info("job run", { ...fields, outcome: "ok", durationMs: since(started) });
            return result;
          } catch (error) {
            log.warn("job run", { ...fields, outcome: "error", durationMs: since(started), error });
            throw error;
          }
        },
      ),
  });
  return new JobRegistry(
    registry.kinds().flatMap((kind) => {
      const definition = registry.get(kind);
      return definition ? [wrap(definition)] : [];
    }),
  );
}

const since = (started: number) => Math.round((performance.now() - started) * 100) / 100;

const RUN_OUTCOMES = ["succeeded", "failed", "dead", "lost", "canceled"] as const;

/**
 * Job-loop events as metrics: runs by kind and outcome, their duration, claims and loop rounds.
 * Every outcome of every kind the loop runs starts at 0, so a rare one (dead, lost) has a series to
 * chart and alert on before it first happens.
 */
export function jobMetrics(
  telemetry: Telemetry,
  kinds: readonly string[] = [],
): ((event: JobEvent) => void) | undefined {
  if (!telemetry.enabled) return undefined;
  const m = telemetry.instruments;
  for (const kind of kinds)
    for (const outcome of RUN_OUTCOMES) m.jobRuns.add(0, { "plinth.job.kind": kind, outcome });
  m.jobsClaimed.add(0);
  return (event) => {
    switch (event.type) {
      case "claimed":
        m.jobsClaimed.add(event.count);
        m.loopTicks.add(1, { loop: "jobs", outcome: "ok" });
        m.loopTickDuration.record(event.durationMs / 1000, { loop: "jobs" });
        break;
      case "succeeded":
      case "failed":
        m.jobRuns.add(1, { "plinth.job.kind": event.kind, outcome: event.type });
        m.jobDuration.record(event.durationMs / 1000, { "plinth.job.kind": event.kind, outcome: event.type });
        break;
      case "dead":
      case "lost":
      case "canceled":
        m.jobRuns.add(1, { "plinth.job.kind": event.kind, outcome: event.type });
        break;
      default:
        break;
    }
  };
}
