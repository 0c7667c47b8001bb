import type { Clock } from "../clock.ts";
import type { Database } from "../db/client.ts";
import type { Redactor } from "../redact.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { RunEvent } from "./completer.ts";
import type { RetryPolicy } from "./queue.ts";
import type { JobRegistry } from "./registry.ts";

/** What the job loop reports, for metrics (src/jobs/telemetry.ts `jobMetrics`). */
export type JobEvent =
  | { type: "claimed"; count: number; requested: number; durationMs: number }
  | RunEvent
  | { type: "released"; ids: number[] }
  | { type: "pruned"; count: number };

export type JobLoopMode = "idle" | "starting" | "claiming" | "waiting" | "backoff" | "stopping" | "stopped";

export interface JobLoopDeps {
  database: Database;
  clock: Clock;
  logger: Logger;
  redactor: Redactor;
}

export interface JobLoopOptions {
  registry: JobRegistry;
  /** `BackgroundProcessing:JobParallelism`. */
  parallelism: number;
  /** `BackgroundProcessing:JobBatchSize`. */
  batchSize: number;
  /**
   * `BackgroundProcessing:JobLocalQueueSize`: jobs claimed ahead of free slots, at most (and at most
   * LOCAL_QUEUE_HORIZON_MS of work). 0 (the default): a claimed job is a running job.
   */
  localQueue?: number;
  /** `BackgroundProcessing:JobPollSeconds`, in ms. */
  pollMs: number;
  retry?: RetryPolicy;
  /** Retention of finished jobs; pruning is off without it. */
  retention?: { succeededMs: number; deadMs: number; intervalMs?: number };
  /** Wake on NOTIFY (default true). Polling works without it, e.g. behind a transaction pooler. */
  listen?: boolean;
  workerId?: string;
  /** Tests shorten the lease; production uses the spec's five minutes. */
  leaseMs?: number;
  /** How often running jobs' leases are renewed; default a third of the lease; 0 switches heartbeats off. */
  heartbeatMs?: number;
  onEvent?: (event: JobEvent) => void;
  random?: () => number;
}
