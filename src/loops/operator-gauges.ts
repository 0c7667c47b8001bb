import { systemCtx } from "../context.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import type { Deps } from "../deps.ts";
import { readinessProbes } from "../health/probes.ts";
import { createReadinessCheck } from "../health/readiness.ts";
import { queueStats, WATCHED_JOB_STATES } from "../jobs/queue-stats.ts";
import { deliveryStats } from "../webhooks/delivery-stats.ts";

/** Each readiness probe of a scrape gets this long. */
const PROBE_TIMEOUT_MS = 1_000;

/**
 * The gauges an operator's dashboard and alerts read (deploy/grafana, deploy/prometheus), observed
 * when metrics are collected (a Prometheus scrape or an OTLP export): the queue by state and kind,
 * the oldest due job, the oldest pending webhook delivery, failing endpoints, readiness by check and
 * the configured pool size. A statement that fails leaves its gauges out of that collection (the
 * readiness gauge then says why). Nothing is registered while telemetry is off. Every kind in
 * `kinds` (the ones this process has handlers for) has its queue series from the start, at 0 while it
 * has no jobs, so a panel or an alert on it never reads an absent series.
 */
export function observeOperatorGauges(deps: Deps, kinds: readonly string[] = []): void {
  const { telemetry } = deps;
  if (!telemetry.enabled) return;
  const meter = telemetry.meter;
  const jobs = meter.createObservableGauge("plinth.jobs.queue", {
    description: "Jobs by state (pending, processing, failed, dead) and kind.",
  });
  const oldestDue = meter.createObservableGauge("plinth.jobs.oldest_due.age", {
    unit: "s",
    description: "How long the longest-waiting due job of each kind has waited.",
  });
  const oldestPending = meter.createObservableGauge("plinth.webhooks.oldest_pending.age", {
    unit: "s",
    description: "Age of the oldest webhook delivery still pending (0 with none).",
  });
  const failing = meter.createObservableGauge("plinth.webhooks.endpoints.failing", {
    description: "Enabled webhook endpoints whose attempts are failing.",
  });
  const ready = meter.createObservableGauge("plinth.readiness", {
    description: "1 when the readiness check passes, 0 when it fails, by check.",
  });
  const poolSize = meter.createObservableGauge("plinth.db.pool.size", {
    description: "Database connections this process may open (Database:PoolSize).",
  });
  const readiness = createReadinessCheck(readinessProbes(deps), {
    timeoutMs: PROBE_TIMEOUT_MS,
    clock: deps.clock,
  });
  meter.addBatchObservableCallback(
    async (observer) => {
      const db = deps.database.db;
      const [queue, deliveries, checks] = await Promise.allSettled([
        queueStats(db),
        // every tenant's deliveries: the named platform path
        withPlatformDatabase(deps, systemCtx("operator-gauges"), deliveryStats),
        readiness(),
      ]);
      observer.observe(poolSize, deps.config.settings.Database.PoolSize);
      if (queue.status === "fulfilled") {
        const seen = new Set([...kinds, ...queue.value.counts.map((row) => row.kind)]);
        for (const kind of seen)
          for (const state of WATCHED_JOB_STATES) {
            const row = queue.value.counts.find((r) => r.kind === kind && r.status === state);
            observer.observe(jobs, row?.count ?? 0, { state, "plinth.job.kind": kind });
          }
        // a kind with jobs but none due waits 0 s
        for (const kind of new Set([...seen, ...queue.value.oldestDue.map((row) => row.kind)]))
          observer.observe(oldestDue, queue.value.oldestDue.find((row) => row.kind === kind)?.seconds ?? 0, {
            "plinth.job.kind": kind,
          });
      }
      if (deliveries.status === "fulfilled") {
        observer.observe(oldestPending, deliveries.value.oldestPendingSeconds);
        observer.observe(failing, deliveries.value.failingEndpoints);
      }
      if (checks.status === "fulfilled")
        for (const [check, [result]] of Object.entries(checks.value.checks))
          observer.observe(ready, result?.status === "pass" ? 1 : 0, { check });
    },
    [jobs, oldestDue, oldestPending, failing, ready, poolSize],
  );
}
