import { expect, test } from "bun:test";
import { MetricReader } from "@opentelemetry/sdk-metrics";
import { ManualClock } from "../../src/clock.ts";
import { createDeps } from "../../src/deps.ts";
import { startBackground } from "../../src/loops/background.ts";
import { measuredTick } from "../../src/loops/interval-loop.ts";
import { schedulesLoop } from "../../src/loops/schedules-loop.ts";
import { subscriptionsLoop } from "../../src/loops/subscriptions-loop.ts";
import { tenantDomainsLoop } from "../../src/loops/tenant-domains-loop.ts";
import { usageReconciliationLoop } from "../../src/loops/usage-reconciliation-loop.ts";
import { createTelemetry } from "../../src/telemetry/sdk.ts";
import { testConfig, useTestDatabase } from "../helpers/app.ts";
import { appDatabaseOf } from "../helpers/database.ts";
import { waitFor } from "../helpers/jobs.ts";

/** A reader the test collects from on demand. */
class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const t = useTestDatabase();

/** `plinth.loop.ticks` by attributes, as the reader sees them now. */
async function loopTicks(
  reader: TestReader,
): Promise<{ attributes: Record<string, unknown>; value: number }[]> {
  const { resourceMetrics } = await reader.collect();
  return resourceMetrics.scopeMetrics
    .flatMap((s) => s.metrics)
    .filter((m) => m.descriptor.name === "plinth.loop.ticks")
    .flatMap((m) => m.dataPoints.map((p) => ({ attributes: p.attributes, value: Number(p.value) })));
}

test("all four background loops record plinth.loop.ticks with their loop name", async () => {
  const reader = new TestReader();
  const telemetry = createTelemetry({ serviceName: "plinth", metricReaders: [reader] });
  // no TenantDomains settings: its tick claims nothing (configuration incomplete) but still counts
  const config = testConfig({ settings: { "BackgroundProcessing:JobPollSeconds": "1" } });
  const deps = await createDeps(config, {
    database: appDatabaseOf(t.database),
    clock: new ManualClock(),
    telemetry,
    logWrite: () => {},
  });
  const background = await startBackground(deps, {
    loops: {
      tenantDomains: tenantDomainsLoop,
      subscriptions: subscriptionsLoop({ intervalMs: 20 }),
      usageReconciliation: usageReconciliationLoop({ intervalMs: 20 }),
      schedules: schedulesLoop({ intervalMs: 20 }),
    },
  });
  try {
    const names = ["jobs", "tenantDomains", "subscriptions", "usageReconciliation", "schedules"];
    const ticks = await waitFor(
      async () => {
        const points = await loopTicks(reader);
        return names.every((n) => points.some((p) => p.attributes.loop === n && p.value > 0)) ? points : null;
      },
      { what: "a tick of every loop" },
    );
    // the loops also say how the round went; the error series of the interval loops exist from the
    // start, at 0, so a dashboard's failure panel has a series before the first failure
    const at = (loop: string, outcome: string) =>
      ticks.find((p) => p.attributes.loop === loop && p.attributes.outcome === outcome)?.value;
    for (const name of names) expect(at(name, "ok")).toBeGreaterThan(0);
    for (const name of names.slice(1)) expect(at(name, "error")).toBe(0);
    const { resourceMetrics } = await reader.collect();
    const duration = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === "plinth.loop.tick.duration");
    expect(new Set(duration?.dataPoints.map((p) => p.attributes.loop))).toEqual(new Set(names));
  } finally {
    await background.stop(1_000);
    await telemetry.shutdown();
  }
});

test("measuredTick counts a failed round with outcome error and passes the error on", async () => {
  const reader = new TestReader();
  const telemetry = createTelemetry({ serviceName: "plinth", metricReaders: [reader] });
  try {
    const tick = measuredTick(telemetry, "example", async () => {
      throw new Error("boom");
    });
    await expect(tick()).rejects.toThrow("boom");
    expect(await loopTicks(reader)).toEqual([
      { attributes: { loop: "example", outcome: "error" }, value: 1 },
    ]);
  } finally {
    await telemetry.shutdown();
  }
});

test("with telemetry off, measuredTick returns the tick itself", () => {
  const tick = async () => 1;
  expect(measuredTick(createTelemetry({ serviceName: "plinth" }), "example", tick)).toBe(tick);
});
