import { expect, test } from "bun:test";
import { MetricReader } from "@opentelemetry/sdk-metrics";
import { sql } from "drizzle-orm";
import { type LimitedAuditDeps, recordAuditLimited } from "../../src/audit/record.ts";
import { AuditSuppressions } from "../../src/audit/suppressions.ts";
import { verifyChain } from "../../src/audit/verify-chains.ts";
import { ManualClock } from "../../src/clock.ts";
import { type Ctx, systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { withTransaction } from "../../src/db/operation.ts";
import { createTelemetry } from "../../src/telemetry/sdk.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { createTenant } from "../helpers/identity.ts";

// A row the audit failure limiter drops is counted (plinth.audit.rows_suppressed), logged once a
// window per key, and marked in the chain by an audit.rows_suppressed row: never dropped silently.
// Counters in Redis (the cache), as in production; the database's counter store: audit-http.test.ts.
const clock = new ManualClock("2026-11-27T10:00:00Z");
const app = useTestApp({
  cache: "audit-suppressed",
  clock,
  settings: relaxedLimits,
  env: () => ({ Audit__FailuresPerMinute: "3", Audit__FailuresPerTenantPerMinute: "5" }),
});
const db = () => app.testDatabase.database.db;

class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** Deps of one process: its own tallies and a metric reader, the app's database and Redis counters. */
function processDeps() {
  const reader = new TestReader();
  const telemetry = createTelemetry({ serviceName: "plinth", metricReaders: [reader] });
  const deps: LimitedAuditDeps = { ...app.deps, telemetry, auditSuppressions: new AuditSuppressions() };
  const suppressed = async () => {
    const { resourceMetrics } = await reader.collect();
    return resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .filter((m) => m.descriptor.name === "plinth.audit.rows_suppressed")
      .flatMap((m) => m.dataPoints.map((p) => ({ attributes: p.attributes, value: Number(p.value) })));
  };
  return { deps, suppressed, shutdown: () => telemetry.shutdown() };
}

const failedSignIn = { action: "auth.sign_in", outcome: "failure", details: { method: "password" } } as const;
const ctxOf = (tenantId: string, address: string): Ctx => ({
  ...systemCtx("test", tenantId),
  clientIp: address,
  requestId: `req-${crypto.randomUUID()}`,
});

/** `n` failed sign-ins from `address`: how many were written. */
async function fail(deps: LimitedAuditDeps, tenantId: string, address: string, n: number): Promise<number> {
  let written = 0;
  for (let i = 0; i < n; i++)
    if (await recordAuditLimited(deps, ctxOf(tenantId, address), failedSignIn)) written++;
  return written;
}

type Row = {
  action: string;
  outcome: string;
  client_address: string | null;
  details: Record<string, unknown>;
};
const rowsOf = (tenantId: string, action: string) =>
  execute<Row>(
    db(),
    sql`select action, outcome, client_address, details from audit_events
        where tenant_id = ${tenantId} and action = ${action} order by id`,
  );

/** The "audit rows suppressed" lines of a tenant, parsed. */
const linesOf = (tenantId: string) =>
  app.logs
    .filter((line) => line.includes('"audit rows suppressed"') && line.includes(tenantId))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

test("dropped rows are counted, logged once a window per key with the count since the last line, and marked in the chain", async () => {
  const { id: tenantId } = await createTenant(db());
  const one = processDeps();
  // before any drop the counter is served at 0
  expect(await one.suppressed()).toEqual([{ attributes: {}, value: 0 }]);
  expect(await fail(one.deps, tenantId, "10.40.0.1", 20)).toBe(3);

  expect(await rowsOf(tenantId, "auth.sign_in")).toHaveLength(3);
  const markers = await rowsOf(tenantId, "audit.rows_suppressed");
  expect(markers).toEqual([
    {
      action: "audit.rows_suppressed",
      outcome: "failure",
      client_address: "10.40.0.1",
      details: { action: "auth.sign_in", limit: "address", perMinute: 3 },
    },
  ]);
  expect(await one.suppressed()).toContainEqual({
    attributes: { "plinth.audit.action": "auth.sign_in", "plinth.audit.limit": "address" },
    value: 17,
  });
  // one line for 17 dropped rows: the first, at once; no address in it
  let lines = linesOf(tenantId);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({
    level: "warn",
    action: "auth.sign_in",
    limit: "address",
    suppressed: 1,
    windowSeconds: 60,
  });
  expect(lines[0]).not.toHaveProperty("sinceSeconds");
  expect(JSON.stringify(lines)).not.toContain("10.40.0.1");

  // half a window on: one permit back (3 a minute), the rest dropped without a line or a marker
  clock.advance(30_000);
  expect(await fail(one.deps, tenantId, "10.40.0.1", 5)).toBe(1);
  expect(linesOf(tenantId)).toHaveLength(1);
  expect(await rowsOf(tenantId, "audit.rows_suppressed")).toHaveLength(1);

  // a window after the first line: the next drop logs every row dropped since it (16 + 4 + this one)
  clock.advance(31_000);
  expect(await fail(one.deps, tenantId, "10.40.0.1", 10)).toBe(2);
  lines = linesOf(tenantId);
  expect(lines).toHaveLength(2);
  expect(lines[1]).toMatchObject({ suppressed: 21, sinceSeconds: 61, limit: "address" });
  // and a second marker: one a minute while rows are dropped
  expect(await rowsOf(tenantId, "audit.rows_suppressed")).toHaveLength(2);
  expect(await one.suppressed()).toContainEqual({
    attributes: { "plinth.audit.action": "auth.sign_in", "plinth.audit.limit": "address" },
    value: 17 + 4 + 8,
  });

  const report = await withTransaction(app.deps, systemCtx("test", tenantId), (tx) =>
    verifyChain(tx, tenantId),
  );
  expect(report.broken).toBeNull();
  await one.shutdown();
});

test("many addresses: a full tenant writes one tenant marker, and address markers stop at the tenant's limit", async () => {
  clock.advance(600_000);
  const { id: tenantId } = await createTenant(db());
  const one = processDeps();
  let written = 0;
  for (let a = 1; a <= 8; a++) written += await fail(one.deps, tenantId, `10.41.0.${a}`, 5);
  expect(written).toBe(5);
  const markers = (await rowsOf(tenantId, "audit.rows_suppressed")).map((row) => row.details);
  expect(markers.filter((d) => d.limit === "tenant")).toEqual([
    { action: "auth.sign_in", limit: "tenant", perMinute: 5 },
  ]);
  expect(markers.filter((d) => d.limit === "address")).toHaveLength(5);
  // 40 attempts: 5 written, 35 dropped, each counted under the limit that refused it
  const points = await one.suppressed();
  const droppedBy = (limit: string) =>
    points.find((p) => p.attributes["plinth.audit.limit"] === limit)?.value ?? 0;
  expect(droppedBy("address") + droppedBy("tenant")).toBe(35);
  expect(droppedBy("tenant")).toBe(19);
  // a line per key: eight addresses and the tenant
  expect(linesOf(tenantId).map((line) => line.limit)).toEqual([
    "address",
    "tenant",
    ...Array<string>(7).fill("address"),
  ]);
  await one.shutdown();
});

test("two processes: one marker a minute per key between them, each logs its own drops", async () => {
  clock.advance(600_000);
  const { id: tenantId } = await createTenant(db());
  const one = processDeps();
  const two = processDeps();
  expect(await fail(one.deps, tenantId, "10.42.0.1", 4)).toBe(3);
  expect(await fail(two.deps, tenantId, "10.42.0.1", 4)).toBe(0);
  expect(await rowsOf(tenantId, "audit.rows_suppressed")).toHaveLength(1);
  expect(linesOf(tenantId).map((line) => line.suppressed)).toEqual([1, 1]);
  // a minute on, the process that finds the key first writes the next one
  clock.advance(61_000);
  await fail(two.deps, tenantId, "10.42.0.1", 4);
  await fail(one.deps, tenantId, "10.42.0.1", 4);
  expect(await rowsOf(tenantId, "audit.rows_suppressed")).toHaveLength(2);
  await one.shutdown();
  await two.shutdown();
});
